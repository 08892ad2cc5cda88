"""What a delivery report per record costs librdkafka's Python producer.

Every at-least-once untracked send of a streamkit worker on the confluent driver carries a
Python callback (``DeliveryCount.on_delivery``): a checkpoint's flush counts the reports of the
records sent before it, and a failed one stops the commit. Exactly-once sends carry none
(``UnreportedCount``: the transaction's commit reports failures). This measures the callback
alone, on the raw client, the same records produced four ways, each in its own process, one
after another, interleaved over ``--repeat`` rounds:

- ``none``: ``produce(topic, value, key, -1, None)``: no report reaches Python;
- ``callback``: a Python function per record as the callback (what an at-least-once send runs);
- ``setitem``: a dict's ``__setitem__`` as the callback, C code (tried in issue 50's round of
  2026-11-29 as a count that reads its records in flight from reference counts; not adopted:
  docs/decisions/0013);
- ``only-error``: the Python callback with ``delivery.report.only.error=true``: librdkafka calls
  it for failed records only (a producer-wide setting: tracked sends would get no report).

Each run sends ``--records`` ~75-byte values under 1,000 keys (murmur2, linger 5 ms, acks=all,
streamkit's producer defaults) to a fresh 4-partition topic, polling every 1,000 sends, then
flushes; it reports records/s from the first send to the end of the flush, the process's CPU µs
a record, and how many callbacks ran (``callback`` must count every record, ``setitem`` must
have stored the outcome "delivered", the others none: a run that does not is marked wrong).
Printed: each mode's median, and ``callback`` and ``setitem`` over ``none`` for rate and CPU.

Usage::

    python benchmarks/delivery_reports.py --broker 127.0.0.1:29092 --records 1000000 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from common import (
    admin_client,
    client_conf,
    cpu_seconds,
    create_topic,
    delete_topics,
    peak_rss_mb,
    rate_summary,
    run_scenario_process,
)

MODES = ("none", "callback", "setitem", "only-error")
PARTITIONS = 4
VALUE = b'{"id":1,"user":"user-1","amount":12.5,"ts":1700000000.0,"processed":true}'


def run_mode(broker: str, topic: str, records: int, mode: str) -> dict[str, Any]:
    """One producer sending ``records`` records (in this process: ``--scenario``)."""
    from confluent_kafka import Producer

    extra: dict[str, Any] = {"linger.ms": 5, "acks": "all", "partitioner": "murmur2_random"}
    if mode == "only-error":
        extra["delivery.report.only.error"] = True
    producer = Producer(client_conf(broker, **extra))
    called = [0]

    def reported(_err: Any, _msg: Any) -> None:
        called[0] += 1

    outcomes: dict[Any, Any] = {}
    callback = {"none": None, "setitem": outcomes.__setitem__}.get(mode, reported)
    keys = [f"user-{i}".encode() for i in range(1000)]
    produce, poll = producer.produce, producer.poll
    cpu0, started = cpu_seconds(), time.perf_counter()
    for i in range(records):
        while True:
            try:
                produce(topic, VALUE, keys[i % 1000], -1, callback)
                break
            except BufferError:  # the local queue is full: serve reports until it has room
                poll(0.01)
        if i % 1000 == 0:
            poll(0)
    left = producer.flush(120)
    elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu0
    expected = records if mode == "callback" else 0
    stored = list(outcomes) == [None] if mode == "setitem" else not outcomes
    return {"scenario": mode, "records": records, "records_per_s": records / elapsed, "elapsed_s": elapsed,
            "cpu_s": cpu, "cpu_us_per_record": cpu / records * 1e6, "peak_rss_mb": peak_rss_mb(),
            "callbacks": called[0], "unflushed": left,
            "ok": left == 0 and called[0] == expected and stored}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--json", default=str(Path(__file__).resolve().parent / "results" / "delivery_reports.json"))
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenario:
        print("RESULT " + json.dumps(run_mode(args.broker, args.topic, args.records, args.scenario)), flush=True)
        return
    admin = admin_client(args.broker)
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    topics: list[str] = []
    try:
        for round_ in range(1, args.repeat + 1):
            for mode in MODES:
                topic = f"bench-dr-{uuid.uuid4().hex[:8]}"
                create_topic(admin, topic, PARTITIONS)
                topics.append(topic)
                result = run_scenario_process(__file__, mode, ["--broker", args.broker, "--records",
                                                               str(args.records), "--topic", topic], args.timeout)
                runs[mode].append(result)
                if "error" in result:
                    print(f"  {mode} #{round_}: FAILED {result['error']}\n{result.get('stderr', '')[-1500:]}")
                    continue
                print(f"  {mode} #{round_}: {result['records_per_s']:,.0f} rec/s, "
                      f"{result['cpu_us_per_record']:.2f} CPU µs/record, {result['callbacks']:,} callbacks"
                      f"{'' if result['ok'] else ' WRONG (callbacks or unflushed records)'}", flush=True)
    finally:
        delete_topics(admin, topics)
    summary: dict[str, Any] = {}
    for mode, results in runs.items():  # a wrong run counts as failed
        ok, stats = rate_summary([r if r.get("ok") else {**r, "error": r.get("error", "wrong")} for r in results])
        if ok:
            summary[mode] = stats | {"median_cpu_us": statistics.median(r["cpu_us_per_record"] for r in ok)}
    print(f"\n{'mode':<12} {'median rec/s':>14} {'CPU µs/record':>14}")
    for mode, s in summary.items():
        print(f"{mode:<12} {s['median_rps']:>14,.0f} {s['median_cpu_us']:>14.2f}")
    ratios = {}
    for mode in ("callback", "setitem"):
        if "none" in summary and mode in summary:
            ratios |= {f"{mode} / none, rate": summary[mode]["median_rps"] / summary["none"]["median_rps"],
                       f"{mode} / none, CPU": summary[mode]["median_cpu_us"] / summary["none"]["median_cpu_us"],
                       f"{mode} - none, CPU µs/record": summary[mode]["median_cpu_us"] - summary["none"]["median_cpu_us"]}
    for name, value in ratios.items():
        print(f"{name:<32} {value:,.2f}")
    Path(args.json).write_text(json.dumps({"broker": args.broker, "records": args.records, "runs": runs,
                                           "summary": summary, "ratios": ratios}, indent=2))
    if any(not s for s in runs.values()) or len(summary) < len(MODES):
        sys.exit(1)


if __name__ == "__main__":
    main()
