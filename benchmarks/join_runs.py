"""The join scenarios of ``python -m benchmarks run``: one run each (streamkit's in joins.py,
Quix's in peers/quix_joins.py), checked against what the inputs must give (join_inputs.py).

A run's ``output_ok``: join-table, every order came out with its customer (none None) and
the output topic holds them all; join-window, exactly the expected pairs and the output topic
holds them. The topic counts are checked only where the broker's end offsets are exact.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from common import create_topic, run_peer_process, run_scenario_process, topics_named
from join_inputs import CUSTOMERS, WITHIN_MS, JoinInputs
from quick_stateless import PARTITIONS, topic_count

HERE = Path(__file__).resolve().parent
JOINS = ["join-table-confluent", "join-table-aiokafka", "join-window-confluent", "join-window-aiokafka"]
PEER_JOINS = ["quix-join-table", "quix-join-window"]


def is_join(scenario: str) -> bool:
    return scenario in JOINS or scenario in PEER_JOINS


def scenario_args(scenario: str, inputs: JoinInputs, broker: str, output: str, group: str) -> list[str]:
    argv = ["--broker", broker, "--output", output, "--group", group, "--records", str(inputs.records)]
    if "join-table" in scenario:
        assert inputs.customers and inputs.orders and inputs.no_orders
        return argv + ["--customers", inputs.customers, "--orders", inputs.orders, "--no-orders", inputs.no_orders,
                       "--customer-count", str(CUSTOMERS)]
    assert inputs.lefts and inputs.rights
    argv += ["--lefts", inputs.lefts, "--rights", inputs.rights, "--within-ms", str(WITHIN_MS)]
    if scenario.startswith("quix-"):
        return argv
    # each with its default grace: Quix 7 days, streamkit 0 (Kafka Streams'); streamkit reads
    # each partition's two sides in timestamp order (joins/aligned.py), so nothing is late
    return argv + ["--expected-pairs", str(inputs.expected_pairs)]


def output_ok(scenario: str, result: dict[str, Any], inputs: JoinInputs, exact_counts: bool) -> bool | None:
    if "error" in result:
        return None
    if "join-table" in scenario:
        ok = result.get("missing_customers") == 0 and result.get("outputs") == inputs.records
        expected = inputs.records
    else:
        result["expected_pairs"] = inputs.expected_pairs
        ok = result.get("pairs") == inputs.expected_pairs
        expected = inputs.expected_pairs
    return ok and (result["output_records"] >= expected if exact_counts else True)


def run_join(scenario: str, args: argparse.Namespace, inputs: JoinInputs, tag: str,
             peers_python: Path | None) -> tuple[dict[str, Any], list[str]]:
    """One run in its own process, with a fresh output topic and group; the result and the
    topics to delete (the output and whatever the framework made for the group)."""
    output, group = f"bench-out-{tag}", f"bench-{tag}"
    create_topic(args.admin, output, PARTITIONS)
    argv = scenario_args(scenario, inputs, args.broker, output, group)
    if scenario.startswith("quix-"):
        assert peers_python is not None
        result = run_peer_process(peers_python, HERE / "peers" / "quix_joins.py", scenario,
                                  ["--scenario", scenario[len("quix-"):], *argv], args.timeout)
    else:
        result = run_scenario_process(str(HERE / "joins.py"), scenario, [*argv, "--timeout", str(args.timeout)],
                                      args.timeout)
    result["output_records"] = topic_count(args.broker, output)
    result["output_ok"] = output_ok(scenario, result, inputs, args.exact_counts)
    return result, [output] + [t for t in topics_named(args.admin, f"{group}-") if t != output]


def describe(result: dict[str, Any]) -> str:
    """The join's part of a run's progress line."""
    if "table_load_s" in result:
        return (f", table of {result['table_keys']:,} loaded in {result['table_load_s']:.2f}s "
                f"({result['table_load_rps']:,.0f} rec/s), {result['missing_customers']} without customer")
    if "pairs" in result:
        return f", pairs {result['pairs']}/{result.get('expected_pairs')}"
    return ""


def summary_fields(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """What a join scenario's summary adds: the table load (median), the pairs (fewest)."""
    out: dict[str, Any] = {}
    if ok and "table_load_s" in ok[0]:
        out["median_table_load_s"] = statistics.median(r["table_load_s"] for r in ok)
        out["median_table_load_rps"] = statistics.median(r["table_load_rps"] for r in ok)
    if ok and "pairs" in ok[0]:
        out["min_pairs"] = min(r["pairs"] for r in ok)
        out["expected_pairs"] = ok[0].get("expected_pairs")
    return out


def ratios(rate: Any, summary: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """join rate ratios streamkit / Quix per driver, and the table loads'."""
    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    def load(name: str) -> float | None:
        s = summary.get(name) or {}
        return s.get("median_table_load_rps") if s.get("ok_runs") else None

    out: dict[str, float | None] = {}
    for family in ("join-table", "join-window"):
        for driver in ("confluent", "aiokafka"):
            out[f"{family} {driver} / quix"] = ratio(rate(f"{family}-{driver}"), rate(f"quix-{family}"))
    for driver in ("confluent", "aiokafka"):
        out[f"join-table load {driver} / quix"] = ratio(load(f"join-table-{driver}"), load("quix-join-table"))
    return out
