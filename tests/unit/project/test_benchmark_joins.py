"""The join scenarios of ``python -m benchmarks run``, without a broker: the inputs and the truth
their runs are checked against, what each run is given, the checks and the ratios.
(tests/integration/test_benchmark_command.py runs the command against a broker.)"""
import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # the benchmark scripts import each other by name
    try:
        import join_inputs
        import join_runs
        import run

        yield SimpleNamespace(inputs=join_inputs, runs=join_runs, run=run)
    finally:
        sys.path.remove(str(BENCHMARKS))


def brute_force_pairs(n, within_ms, inputs):
    step, lag, keys = inputs.STEP_MS, inputs.RIGHT_LAG_MS, inputs.WINDOW_KEYS
    return sum(1 for i in range(n) for j in range(i % keys, n, keys) if abs(step * j + lag - step * i) <= within_ms)


@pytest.mark.parametrize("n", [1, 999, 1000, 3500])
@pytest.mark.parametrize("within_ms", [0, 4, 5, 1000, 9995, 10005, 25005])
def test_expected_pairs_counts_every_pair_of_a_key_within_the_window(bench, n, within_ms):
    assert bench.inputs.expected_pairs(n, within_ms) == brute_force_pairs(n, within_ms, bench.inputs)


def test_with_the_benchmarks_window_each_left_pairs_with_its_own_right_only(bench):
    assert bench.inputs.expected_pairs(5000) == brute_force_pairs(5000, bench.inputs.WITHIN_MS, bench.inputs) == 5000


def test_window_records_are_what_the_truth_assumes(bench):
    inputs = bench.inputs
    lefts = list(inputs.window_records(2500, 1_000, 0))
    rights = list(inputs.window_records(2500, 1_000, inputs.RIGHT_LAG_MS))
    for i in (0, 1, 999, 1000, 2499):
        for (key, value, ts), lag in ((lefts[i], 0), (rights[i], inputs.RIGHT_LAG_MS)):
            assert key == f"k{i % inputs.WINDOW_KEYS}".encode()
            assert ts == 1_000 + inputs.STEP_MS * i + lag
            assert orjson.loads(value)["id"] == i


def test_orders_come_after_every_customer_and_name_one(bench):
    inputs = bench.inputs
    customers = list(inputs.customer_records(1_764_000_000_000))
    orders = list(inputs.order_records(inputs.CUSTOMERS + 10, 1_764_000_000_000))
    assert len(customers) == inputs.CUSTOMERS
    assert max(ts for _, _, ts in customers) < min(ts for _, _, ts in orders)
    keys = {key for key, _, _ in customers}
    assert all(key in keys for key, _, _ in orders)
    assert orders[inputs.CUSTOMERS][0] == b"c0"
    assert all(90 <= len(value) <= 115 for _, value, _ in orders[:100])  # ~100-byte JSON, like the other inputs


def join_inputs(bench, records=1000):
    return bench.inputs.JoinInputs(records, customers="c", orders="o", no_orders="none", lefts="l", rights="r",
                                   expected_pairs=records)


def test_each_window_join_keeps_its_frameworks_default_grace_and_streamkit_gets_the_truth(bench):
    inputs = join_inputs(bench)
    argv = bench.runs.scenario_args("join-window-confluent", inputs, "b:1", "out", "g")
    assert "--grace-ms" not in argv  # streamkit's default: 0, as Kafka Streams'
    assert argv[argv.index("--expected-pairs") + 1] == "1000"
    quix = bench.runs.scenario_args("quix-join-window", inputs, "b:1", "out", "g")
    assert "--grace-ms" not in quix and quix[quix.index("--within-ms") + 1] == str(bench.inputs.WITHIN_MS)
    table = bench.runs.scenario_args("join-table-aiokafka", inputs, "b:1", "out", "g")
    assert table[table.index("--no-orders") + 1] == "none" and table[table.index("--orders") + 1] == "o"


@pytest.mark.parametrize("result, exact, ok", [
    ({"missing_customers": 0, "outputs": 1000, "output_records": 1000}, True, True),
    ({"missing_customers": 1, "outputs": 1000, "output_records": 1000}, True, False),
    ({"missing_customers": 0, "outputs": 999, "output_records": 1000}, True, False),
    ({"missing_customers": 0, "outputs": 1000, "output_records": 10}, True, False),
    ({"missing_customers": 0, "outputs": 1000, "output_records": 10}, False, True),  # counts not exact here
    ({"error": "exit 1", "output_records": 0}, True, None),
])
def test_a_table_join_run_is_complete_when_every_order_came_out_with_its_customer(bench, result, exact, ok):
    assert bench.runs.output_ok("join-table-confluent", result, join_inputs(bench), exact) is ok


@pytest.mark.parametrize("pairs, ok", [(1000, True), (999, False), (1001, False)])
def test_a_window_join_run_is_complete_with_exactly_the_expected_pairs(bench, pairs, ok):
    result = {"pairs": pairs, "output_records": pairs}
    assert bench.runs.output_ok("quix-join-window", result, join_inputs(bench), True) is ok
    assert result["expected_pairs"] == 1000


def test_join_ratios_per_driver_against_quix(bench):
    rates = {"join-table-confluent": 40.0, "quix-join-table": 20.0, "join-window-aiokafka": 30.0}
    summary = {"join-table-aiokafka": {"ok_runs": 1, "median_table_load_rps": 9.0},
               "quix-join-table": {"ok_runs": 1, "median_table_load_rps": 3.0}}
    out = bench.runs.ratios(rates.get, summary)
    assert out["join-table confluent / quix"] == 2.0
    assert out["join-table aiokafka / quix"] is None
    assert out["join-window confluent / quix"] is None and out["join-window aiokafka / quix"] is None
    assert out["join-table load aiokafka / quix"] == 3.0 and out["join-table load confluent / quix"] is None


def scenarios(bench, subset="", no_peers=False, recovery_keys=1):
    return bench.run.select_scenarios(argparse.Namespace(scenarios=subset, no_peers=no_peers,
                                                         recovery_keys=recovery_keys))


def test_the_default_run_includes_both_join_families_and_their_quix_peers(bench):
    names = scenarios(bench)
    for name in bench.runs.JOINS + bench.runs.PEER_JOINS:
        assert name in names
    assert not set(bench.runs.PEER_JOINS) & set(scenarios(bench, no_peers=True))
    assert set(bench.runs.JOINS) <= set(scenarios(bench, no_peers=True))


def test_a_subset_runs_only_the_joins_named(bench):
    assert scenarios(bench, "quix-join-table,join-table-confluent,join-window-aiokafka") == [
        "join-table-confluent", "join-window-aiokafka", "quix-join-table"]


def test_the_performance_targets_ratios_state_vs_stateless_tail_latency_and_recovery_vs_ceiling(bench):
    """The ratios issue 18's targets name, printed by the same run (not only the peer ratios)."""
    ok = {"ok_runs": 3}
    summary = {"streamkit-confluent": {**ok, "median_rps": 100.0},
               "streamkit-confluent-stateful": {**ok, "median_rps": 85.0},
               "streamkit-aiokafka": {**ok, "median_rps": 50.0}}
    extras = {"latency-aiokafka": {**ok, "rate": 1000, "median_p50_ms": 2.0, "median_p99_ms": 9.0,
                                   "median_p999_ms": 15.0, "median_max_ms": 40.0},
              "recovery": {"summary": {"raw-confluent": {**ok, "median_rps": 400.0},
                                       "confluent-rocksdb": {**ok, "median_rps": 200.0}}}}
    out = bench.run.ratios(summary, extras)
    assert out["stateful / stateless confluent"] == 0.85
    assert out["stateful / stateless aiokafka"] is None  # no stateful run: no ratio, never a guess
    assert out["latency aiokafka at 1,000 rec/s: p99.9 ms"] == 15.0
    assert out["latency aiokafka at 1,000 rec/s: max ms"] == 40.0
    assert out["recovery confluent-rocksdb / raw consume ceiling"] == 0.5
    assert "recovery raw-confluent / raw consume ceiling" not in out


def test_the_columnar_scenarios_run_when_named_and_an_unknown_name_is_refused(bench):
    """``--scenarios`` dropped names it did not know without a word (the columnar ones among them)."""
    asked = "raw-confluent,streamkit-confluent-columnar,streamkit-confluent-function"
    assert scenarios(bench, asked, no_peers=True) == [
        "raw-confluent", "streamkit-confluent-function", "streamkit-confluent-columnar"]
    with pytest.raises(SystemExit, match="streamkit-confluent-columnr is no scenario"):
        scenarios(bench, "raw-confluent,streamkit-confluent-columnr")


def test_the_default_run_has_the_columnar_scenarios_skipped_without_pyarrow(bench, monkeypatch):
    """Issue 50's columnar target (columnar / raw confluent) was printed "n/a" by a whole run:
    its scenarios ran only when named. They run by default now, after the function agents
    they are compared with; without pyarrow (``streamkit[columnar]``) they are skipped, saying so."""
    names = scenarios(bench)
    for driver in ("confluent", "aiokafka"):
        assert names.index(f"streamkit-{driver}-columnar") > names.index(f"streamkit-{driver}-function")
    assert bench.run.columnar_unavailable() is None  # the dev install has pyarrow
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    assert "streamkit[columnar]" in bench.run.columnar_unavailable()
