"""The peers' stateful and windowed outputs are checked by value (``benchmarks/peer_outputs.py``),
not only counted: a wrong count per key, a wrong or repeated window final is caught, and Pathway's
update rows (a retraction and an insertion per key per minibatch) are read by their insertions.
And the Bytewax / Pathway scenarios are in ``python -m benchmarks run``, with their ratios."""
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # the benchmark scripts import each other by name
    try:
        import dataflow_peers
        import extras
        import peer_outputs
        import run

        yield SimpleNamespace(out=peer_outputs, dataflow=dataflow_peers, run=run, extras=extras)
    finally:
        sys.path.remove(str(BENCHMARKS))


def orders(n, keys=3, t0=1_800_000_000.0):
    """The harness's input shape: user-<i % keys>, one record per second of ``ts``."""
    return [(f"user-{i % keys}", {"id": i, "user": f"user-{i % keys}", "ts": t0 + i}) for i in range(n)]


def counts_per_record(rows):
    seen = Counter()
    out = []
    for key, value in rows:
        seen[value["user"]] += 1
        out.append((key, {"user": value["user"], "count": seen[value["user"]]}))
    return out


def test_counts_per_key_must_sum_to_the_records_consumed(bench):
    rows = counts_per_record(orders(300))
    good = bench.out.check_counts(rows, 300)
    assert good["output_ok"] and good["keys"] == 3, good
    wrong = [(k, {**v, "count": v["count"] + 1}) if i == len(rows) - 1 else (k, v) for i, (k, v) in enumerate(rows)]
    assert not bench.out.check_counts(wrong, 300)["output_ok"]  # one key's last count off by one
    assert not bench.out.check_counts(rows[:-1], 300)["output_ok"]  # a key's last count missing
    assert "WRONG" in bench.out.check_counts(rows, 301)["check"]


def test_pathway_updates_are_read_by_their_insertions(bench):
    rows = [("user-0", {"user": "user-0", "count": 5, "diff": 1}), ("user-0", {"user": "user-0", "count": 5, "diff": -1}),
            ("user-0", {"user": "user-0", "count": 9, "diff": 1}), ("user-1", {"user": "user-1", "count": 4, "diff": 1})]
    assert bench.out.check_counts(rows, 13)["output_ok"]
    assert not bench.out.check_counts(rows, 18)["output_ok"]  # the retracted 5 is not counted again


def window_finals(rows, scale=1000):
    expected = Counter((v["user"], bench_window(v["ts"])) for _k, v in rows)
    return expected, [(user, {"start": start * scale, "end": (start + 60) * scale, "value": n})
                      for (user, start), n in expected.items()]


def bench_window(ts):
    return int(ts // 60 * 60)


def test_window_finals_must_equal_the_inputs_count_and_come_once(bench):
    rows = orders(600)
    expected = bench.out.expected_windows(rows)
    truth, finals = window_finals(rows)
    assert expected == truth
    for scale in (1000, 1):  # epoch ms (Quix, Bytewax) and seconds (faust, Pathway)
        good = bench.out.check_windows(window_finals(rows, scale)[1], expected)
        assert good["output_ok"] and good["window_coverage"] == 1.0, good
    user, value = finals[0]
    off = [(user, {**value, "value": value["value"] - 1})] + finals[1:]
    assert bench.out.check_windows(off, expected)["windows_wrong"] == 1
    assert not bench.out.check_windows(off, expected)["output_ok"]
    twice = finals + [(user, {**value, "value": value["value"] - 1})]  # an early emission, then the final
    result = bench.out.check_windows(twice, expected)
    assert not result["output_ok"] and result["windows_not_final"] == 1, result
    partial = bench.out.check_windows(finals[: len(finals) // 2], expected)  # windows still open at the stop
    assert partial["output_ok"] and partial["window_coverage"] == pytest.approx(0.5, abs=0.05)
    assert not bench.out.check_windows([], expected)["output_ok"]  # nothing out is not a pass


def test_the_dataflow_peers_are_scenarios_of_the_run_with_their_parallelism(bench):
    args = SimpleNamespace(no_peers=False, scenarios="", recovery_keys=0)
    scenarios = bench.run.select_scenarios(args)
    for peer in ("bytewax", "pathway"):
        for kind in ("stateless", "stateful", "windowed"):
            assert f"{peer}-{kind}" in scenarios and f"{peer}-{kind}-all-cores" in scenarios
    assert not any(bench.dataflow.is_dataflow(s) for s in bench.run.select_scenarios(
        SimpleNamespace(no_peers=True, scenarios="", recovery_keys=0)))
    assert bench.dataflow.kind("pathway-windowed-all-cores") == "windowed"


def test_their_ratios_are_streamkit_over_theirs_with_pathways_caveat(bench):
    rates = {"streamkit-confluent": 60_000.0, "bytewax-stateless": 30_000.0, "pathway-stateless": 120_000.0,
             "bytewax-stateless-all-cores": 45_000.0}
    out = bench.dataflow.ratios(rates.get, {}, rates)
    assert out["stateless confluent / bytewax"] == 2.0
    pathway = [name for name in out if name.startswith("stateless confluent / pathway")]
    assert pathway and "start included" in pathway[0] and out[pathway[0]] == 0.5
    assert out["bytewax-stateless: all cores / default"] == 1.5
    assert not any("windowed" in name for name in out)  # not run: not printed


def test_all_cores_ratios_take_streamkits_all_core_runs_on_both_drivers(bench):
    """All cores against all cores: the stateless pipeline's two-worker scale-out rate, the
    stateful and windowed ones' one-command runs; one process against their default, per driver."""
    rates = {"streamkit-confluent-stateful": 100_000.0, "streamkit-aiokafka-stateful": 80_000.0,
             "pathway-stateful": 50_000.0, "pathway-stateful-all-cores": 200_000.0,
             "bytewax-windowed-all-cores": 40_000.0, "bytewax-stateless-all-cores": 50_000.0}
    extras = {"all-cores-confluent-stateful": {"rps": 150_000.0}, "all-cores-aiokafka-stateful": {"rps": 100_000.0},
              "all-cores-confluent-windowed": {"rps": 120_000.0}, "scale-out-aiokafka": {"two_workers_rps": 75_000.0},
              "all-cores-aiokafka-windowed": {"error": "1 wrong", "ok_runs": 0}}
    out = bench.dataflow.ratios(rates.get, extras, rates)
    assert out["stateful confluent all cores / pathway all cores"] == 0.75
    assert out["stateful aiokafka all cores / pathway all cores"] == 0.5
    assert out["windowed confluent all cores / bytewax all cores"] == 3.0
    assert out["stateless aiokafka all cores / bytewax all cores"] == 1.5
    # a failed run (no rate) and a run not made print no ratio rather than one made up
    assert "windowed aiokafka all cores / bytewax all cores" not in out
    assert "stateless confluent all cores / bytewax all cores" not in out
    assert [out[name] for name in out if name.startswith(("stateful confluent / pathway",
                                                          "stateful aiokafka / pathway"))] == [2.0, 1.6]


def test_all_cores_is_one_process_per_core_sharing_the_partitions_evenly(bench, monkeypatch):
    for cores, processes in ((1, 1), (2, 2), (3, 2), (4, 4), (16, 4)):
        monkeypatch.setattr(bench.extras.os, "cpu_count", lambda cores=cores: cores)
        assert bench.extras.all_cores_processes() == processes, cores


def test_a_peer_run_with_a_short_final_is_not_complete_and_says_why(bench, monkeypatch):
    rows = orders(300)
    expected, finals = window_finals(rows)
    user, value = finals[0]
    short = [(user, {**value, "value": value["value"] - 1, "diff": 1})] + finals[1:]  # a late record dropped
    monkeypatch.setattr(bench.run, "read_topic", lambda broker, topic: iter(short))
    args = SimpleNamespace(broker="127.0.0.1:1", input_windows=expected)
    result = {"consumed": 300, "output_ok": None}
    bench.run.check_values("pathway-windowed-all-cores", args, "in", "out", result)
    assert result["output_ok"] is False and "1 wrong" in result["check"], result
    wrong = f"(e.g. {user} at {value['start'] // 1000}: [{value['value'] - 1}] for {value['value']})"
    assert wrong in result["check"], result  # which window, what came out, what the input holds
    assert "one event time over all partitions" in result["check"]  # Pathway's caveat, printed
    monkeypatch.setattr(bench.run, "read_topic", lambda broker, topic: iter(finals))
    fine = {"consumed": 300, "output_ok": None}
    bench.run.check_values("bytewax-windowed", args, "in", "out", fine)
    assert fine["output_ok"] is True and "0 wrong" in fine["check"], fine


def test_a_failed_install_of_their_venv_is_a_reason_to_skip_not_a_crash(bench, monkeypatch, tmp_path):
    import subprocess

    monkeypatch.setattr(bench.dataflow, "VENV", tmp_path / "venv")

    def no_index(cmd, **kwargs):
        raise subprocess.CalledProcessError(1, cmd, stderr="ERROR: No matching distribution found for pathway==0.33.0")

    monkeypatch.setattr(bench.dataflow.subprocess, "run", no_index)
    python, why = bench.dataflow.ensure_venv(log=lambda line: None)
    assert python is None and "No matching distribution found for pathway" in why, why
    assert not (tmp_path / "venv" / ".installed").exists()


def test_streamkits_own_counts_and_finals_are_checked_by_value(bench, monkeypatch):
    """streamkit's stateful, fold and windowed scenarios get the peers' value checks: its keys
    come JSON-quoted and its finals carry no user field, so the key names the user."""
    rows = orders(300)
    expected, finals = window_finals(rows)
    quoted = [(f'"{user}"', value) for user, value in finals]
    short = [(quoted[0][0], {**quoted[0][1], "value": quoted[0][1]["value"] - 1})] + quoted[1:]
    args = SimpleNamespace(broker="127.0.0.1:1", input_windows=expected, exact_counts=True)
    monkeypatch.setattr(bench.run, "read_topic", lambda broker, topic: iter(short))
    result = {"consumed": 300, "output_ok": None}
    bench.run.check_values("streamkit-confluent-windowed", args, "in", "out", result)
    assert result["output_ok"] is False and "1 wrong" in result["check"], result
    monkeypatch.setattr(bench.run, "read_topic", lambda broker, topic: iter(quoted))
    right = {"consumed": 300, "output_ok": None}
    bench.run.check_values("streamkit-aiokafka-windowed", args, "in", "out", right)
    assert right["output_ok"] is True and "0 wrong" in right["check"], right
    counts = [(f'"{key}"', value) for key, value in counts_per_record(rows)]
    monkeypatch.setattr(bench.run, "read_topic", lambda broker, topic: iter(counts))
    for scenario in ("streamkit-aiokafka-fold", "streamkit-confluent-stateful"):
        counted = {"consumed": 300, "output_ok": True}
        bench.run.check_values(scenario, args, "in", "out", counted)
        assert counted["output_ok"] is True and counted["check"] == "counts per key sum to 300 of 300 consumed"
    stateless = {"consumed": 300, "output_ok": True}
    bench.run.check_values("streamkit-confluent-eos", args, "in", "out", stateless)
    assert "check" not in stateless  # one output per input: its count is its check
    dev = SimpleNamespace(broker="127.0.0.1:1", input_windows=expected, exact_counts=False)
    unread = {"consumed": 300, "output_ok": None}
    bench.run.check_values("streamkit-confluent-windowed", dev, "in", "out", unread)
    assert unread == {"consumed": 300, "output_ok": None}  # the dev broker's ends are inexact: not vouched for
