# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Table recovery benchmark: how fast ``streamkit.tables.recovery.replay`` restores stores from a changelog.

One run against one broker:

1. prepares once: creates a changelog-like topic (4 partitions, ``cleanup.policy=compact``) and
   fills it with N records with distinct keys ``key-<i>`` and ~10-20 byte JSON values
   ``{"n": <i>}``, partitioned with Java-compatible murmur2 (confluent ``murmur2_random``);
2. runs each scenario in its own subprocess (fresh process, so peak RSS is the scenario's own),
   one after another, never in parallel, interleaved over ``--repeat`` rounds:

   - ``<driver>-<store>`` for driver in (aiokafka, confluent) and store in (rocksdb, memory):
     ``Settings(broker=..., driver=driver)``, ``create_driver(settings)``, one empty store per
     changelog partition (``RocksStore(<tmpdir>/<p>)`` or ``MemoryStore()``), then times
     ``await replay(driver, stores, RecoveryProgress(), settle=--settle, bad_values=, on_bad=, blocks=)``
     as the worker's restore calls it (every value checked by a default table's decoding, tagged
     JSON, before it is applied; the changelog fed through at-least-once checkpoint blocks);
     afterwards checks
     the number replayed == N, every store's offset == its partition's end offset - 1, the key
     count (memory: ``len(store.data)``; RocksDB: a full key iteration, outside the timing) and
     spot-checks keys (right partition, right value);
   - ``raw-confluent``: the ceiling — a plain confluent ``Consumer`` assigned to the 4 partitions
     from offset 0, ``consume(10000, 0.5)`` until N records, no store;

3. prints a table and writes everything to ``--json`` (default benchmarks/results/recovery.json).

Timing: ``replay()`` only returns after the end offsets are reached *and* fetches have been
empty for ``settle`` seconds (0.3 s by default; it is measured from the first empty fetch, which
itself waits 0.1 s). So three times are reported per replay run:

- ``elapsed_s``: the whole ``replay()`` call (consumer start, end offsets, fetching, applying,
  the quiet period, consumer stop);
- ``elapsed_minus_settle_s`` = ``elapsed_s`` - ``settle`` (the headline ``rec/s`` column);
- ``to_last_apply_s``: from the call to the last store write (stores here are thin subclasses of
  RocksStore/MemoryStore that note the time of each ``apply`` — one clock read per fetched batch).

Usage::

    python benchmarks/recovery.py --broker 127.0.0.1:19092 --keys 1000000 --repeat 3
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import (  # benchmarks/ is on sys.path when run as a script
    admin_client,
    cpu_seconds,
    create_topic,
    current_rss_mb,
    delete_topics,
    peak_rss_mb,
    produce_all,
    rate_summary,
    run_scenario_process,
)

SCENARIOS = ("raw-confluent", "aiokafka-rocksdb", "aiokafka-memory", "confluent-rocksdb", "confluent-memory")
PARTITIONS = 4
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "recovery.json"
SPOT_CHECKS = 200


# -- measurement helpers (used inside scenario processes) -----------------------------------------


def expected_value(i: int) -> bytes:
    return b'{"n": %d}' % i


# -- scenario: raw confluent ceiling --------------------------------------------------------------


def run_raw_confluent(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    rss_before = current_rss_mb()
    peak_before = peak_rss_mb()
    cpu0 = cpu_seconds()
    started = time.perf_counter()
    consumer = Consumer({
        "bootstrap.servers": args.broker,
        "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 10,
    })
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(PARTITIONS)])
    n, count, errors = args.keys, 0, 0
    first: float | None = None
    deadline = time.monotonic() + args.timeout
    while count < n:
        msgs = consumer.consume(10000, 0.5)
        if msgs and first is None:
            first = time.perf_counter()
        for m in msgs:
            if m.error() is None:
                count += 1
            else:
                errors += 1
        if time.monotonic() > deadline:
            raise SystemExit(f"timeout: consumed {count}/{n}")
    done = time.perf_counter()
    cpu1 = cpu_seconds()
    consumer.close()
    elapsed = done - started
    return {
        "scenario": "raw-confluent",
        "replayed": count,
        "elapsed_s": elapsed,
        "elapsed_minus_settle_s": elapsed,  # no settle period: stops at the N-th record
        "to_last_apply_s": elapsed,
        "first_record_s": (first - started) if first else None,
        "records_per_s": count / elapsed,
        "records_per_s_incl_settle": count / elapsed,
        "records_per_s_to_last_apply": count / elapsed,
        "cpu_s": cpu1 - cpu0,
        "rss_before_mb": rss_before,
        "peak_rss_before_mb": peak_before,
        "peak_rss_mb": peak_rss_mb(),
        "errors_seen": errors,
        "replayed_ok": count == n,
        "keys_ok": None,
    }


# -- scenarios: streamkit replay() ----------------------------------------------------------------


def timed_store_classes():
    from streamkit.tables.stores import MemoryStore, RocksStore

    class Clock:
        first: float | None = None
        last: float | None = None

    def note() -> None:
        now = time.perf_counter()
        if Clock.first is None:
            Clock.first = now
        Clock.last = now

    class TimedMemoryStore(MemoryStore):
        def apply(self, batch, changelog_offset, sources=None):  # type: ignore[override]
            super().apply(batch, changelog_offset, sources)
            note()

    class TimedRocksStore(RocksStore):
        def apply(self, batch, changelog_offset, sources=None):  # type: ignore[override]
            super().apply(batch, changelog_offset, sources)
            note()

    return Clock, TimedMemoryStore, TimedRocksStore


def worker_checks(stores: dict[Any, Any]) -> dict[str, Any]:
    """What the worker's restore does besides applying (tables/manager.py): every value checked
    by the table's own decoding (a default ``app.Table``: tagged JSON) before it is applied, and
    an at-least-once table's changelog fed through its checkpoint blocks (marks.py)."""
    import streamkit
    from streamkit.tables.marks import MarkedBlocks

    table = streamkit.App("bench-recovery").Table("counts", default=int)
    check = table.entries.bad_values

    def bad_values(_tp: Any, values: Any) -> list[Any]:
        return check(values)

    async def on_bad(_tp: Any, message: Any, problem: BaseException) -> None:
        raise SystemExit(f"a benchmark changelog record did not decode: {problem!r}")

    blocks = {tp: MarkedBlocks(lambda _offsets: True, marked=False, after=store.offset) for tp, store in stores.items()}
    return {"bad_values": bad_values, "on_bad": on_bad, "blocks": blocks}


async def run_replay(args: argparse.Namespace, driver_name: str, store_kind: str) -> dict[str, Any]:
    import streamkit
    from streamkit.tables.recovery import RecoveryProgress, replay
    from streamkit.transport import TP, create_driver
    from streamkit.transport.partitioner import partition_for_key

    Clock, TimedMemoryStore, TimedRocksStore = timed_store_classes()
    settings = streamkit.Settings(broker=args.broker, driver=driver_name)
    driver = create_driver(settings)
    tmpdir = tempfile.mkdtemp(prefix="streamkit-bench-recovery-") if store_kind == "rocksdb" else None
    tps = [TP(args.topic, p) for p in range(PARTITIONS)]
    stores: dict[Any, Any] = {
        tp: TimedRocksStore(os.path.join(tmpdir, str(tp.partition))) if tmpdir else TimedMemoryStore() for tp in tps
    }
    progress = RecoveryProgress()
    n = args.keys
    try:
        rss_before = current_rss_mb()
        peak_before = peak_rss_mb()
        cpu0 = cpu_seconds()
        started = time.perf_counter()
        replayed = await replay(driver, stores, progress, settle=args.settle, **worker_checks(stores))
        done = time.perf_counter()
        cpu1 = cpu_seconds()
        peak_after = peak_rss_mb()
        rss_after = current_rss_mb()
        elapsed = done - started
        to_last = (Clock.last - started) if Clock.last else elapsed

        # -- verification (not timed) --
        ends = {tp: int(x) for tp, x in zip(tps, args.ends.split(","), strict=False)}
        offsets_ok = all(stores[tp].offset == ends[tp] - 1 for tp in tps)
        check_started = time.perf_counter()
        if store_kind == "memory":
            per_store = [len(stores[tp].data) for tp in tps]
        else:
            per_store = [sum(1 for _ in stores[tp]._db.keys()) for tp in tps]
        key_count = sum(per_store)
        rng = random.Random(42)
        sample = sorted({0, n - 1, *(rng.randrange(n) for _ in range(SPOT_CHECKS))})
        bad: list[str] = []
        for i in sample:
            key = f"key-{i}".encode()
            p = partition_for_key(key, PARTITIONS)
            got = stores[tps[p]].get(key)
            if got != expected_value(i):
                holders = [tp.partition for tp in tps if stores[tp].get(key) is not None]
                bad.append(f"{key.decode()}: partition {p} has {got!r}, found in {holders}")
        check_s = time.perf_counter() - check_started
    finally:
        for store in stores.values():
            store.close()
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    base = elapsed - args.settle
    return {
        "scenario": f"{driver_name}-{store_kind}",
        "replayed": replayed,
        "progress_total": progress.total,
        "progress_done": progress.done,
        "elapsed_s": elapsed,
        "elapsed_minus_settle_s": base,
        "to_last_apply_s": to_last,
        "first_record_s": (Clock.first - started) if Clock.first else None,
        "after_last_apply_s": elapsed - to_last,
        "records_per_s": replayed / base if base > 0 else float("inf"),
        "records_per_s_incl_settle": replayed / elapsed,
        "records_per_s_to_last_apply": replayed / to_last if to_last > 0 else float("inf"),
        "cpu_s": cpu1 - cpu0,
        "rss_before_mb": rss_before,
        "peak_rss_before_mb": peak_before,
        "peak_rss_mb": peak_after,
        "rss_after_mb": rss_after,
        "settle_s": args.settle,
        "offsets_ok": offsets_ok,
        "key_count": key_count,
        "keys_per_partition": per_store,
        "spot_checked": len(sample),
        "spot_check_failures": bad[:10],
        "verify_s": check_s,
        "replayed_ok": replayed == n,
        "keys_ok": key_count == n and not bad and offsets_ok,
    }


def scenario_main(args: argparse.Namespace) -> None:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.scenario == "raw-confluent":
        result = run_raw_confluent(args)
    elif args.scenario in SCENARIOS:
        driver_name, store_kind = args.scenario.split("-")
        result = asyncio.run(run_replay(args, driver_name, store_kind))
    else:
        raise SystemExit(f"unknown scenario {args.scenario!r}")
    print("RESULT " + json.dumps(result), flush=True)


# -- parent: topic, data, orchestration, report ---------------------------------------------------


def fill_changelog(broker: str, topic: str, n: int) -> float:
    records = ((b"key-%d" % i, expected_value(i)) for i in range(n))
    return produce_all(broker, topic, records, "changelog records", **{
        "linger.ms": 50, "batch.num.messages": 100000, "queue.buffering.max.messages": 1000000,
        "queue.buffering.max.kbytes": 1048576})


def end_offsets(broker: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"bench-count-{uuid.uuid4().hex[:8]}"})
    try:
        out = []
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if low != 0:
                raise RuntimeError(f"{topic}[{p}] low watermark {low}, expected 0")
            out.append(high)
        return out
    finally:
        consumer.close()


def run_scenario(args: argparse.Namespace, scenario: str, ends: list[int]) -> dict[str, Any]:
    return run_scenario_process(str(Path(__file__).resolve()), scenario, [
        "--broker", args.broker, "--keys", str(args.keys), "--topic", args.topic, "--ends", ",".join(map(str, ends)),
        "--settle", str(args.settle), "--timeout", str(args.timeout)], args.timeout)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok, summary = rate_summary(runs)
    if ok:
        summary.update({
            "median_rps_incl_settle": statistics.median(r["records_per_s_incl_settle"] for r in ok),
            "median_rps_to_last_apply": statistics.median(r["records_per_s_to_last_apply"] for r in ok),
            "median_rss_before_mb": statistics.median(r["rss_before_mb"] for r in ok),
            "all_replayed_exactly_n": len(ok) == len(runs) and all(r["replayed_ok"] for r in ok),
            "all_keys_ok": None if ok[0]["keys_ok"] is None
            else (len(ok) == len(runs) and all(r["keys_ok"] for r in ok)),
        })
    return summary


def print_table(summary: dict[str, dict[str, Any]], settle: float) -> None:
    header = (f"{'scenario':<19}{'median rec/s':>13}{'min-max rec/s':>21}{'rec/s incl settle':>19}"
              f"{'rec/s to last write':>21}{'CPU s':>7}{'RSS before MB':>15}{'peak RSS MB':>13}  check")
    print(f"rec/s = records replayed / (replay() wall time - settle {settle:g}s); "
          "'incl settle' = the whole replay() call; 'to last write' = up to the last store write")
    print(header)
    print("-" * len(header))
    for name, s in summary.items():
        if not s.get("ok_runs"):
            print(f"{name:<19}{'FAILED':>13}  {s.get('errors')}")
            continue
        span = f"{s['min_rps']:,.0f}-{s['max_rps']:,.0f}"
        check = "exactly N" if s["all_replayed_exactly_n"] else "NOT N"
        if s["all_keys_ok"] is not None:
            check += ", keys ok" if s["all_keys_ok"] else ", KEYS WRONG"
        print(f"{name:<19}{s['median_rps']:>13,.0f}{span:>21}{s['median_rps_incl_settle']:>19,.0f}"
              f"{s['median_rps_to_last_apply']:>21,.0f}{s['median_cpu_s']:>7.2f}{s['median_rss_before_mb']:>15.1f}"
              f"{s['max_peak_rss_mb']:>13.1f}  {check}")


def parent_main(args: argparse.Namespace) -> None:
    run_id = uuid.uuid4().hex[:8]
    scenarios = [s for s in SCENARIOS if s in args.scenarios.split(",")]
    client = admin_client(args.broker)  # one client, kept alive for all its futures
    created: list[str] = []
    fill_s = None
    if args.topic:
        print(f"using existing topic {args.topic}", flush=True)
    else:
        args.topic = f"bench-changelog-{run_id}"
        create_topic(client, args.topic, PARTITIONS, {"cleanup.policy": "compact"})
        created.append(args.topic)
    print(f"broker {args.broker}, {args.keys} keys, {args.repeat} repeats, topic {args.topic}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in scenarios}
    started = time.perf_counter()
    try:
        if created:
            fill_s = fill_changelog(args.broker, args.topic, args.keys)
        ends = end_offsets(args.broker, args.topic)
        print(f"changelog holds {sum(ends)} records {ends}" + (f", filled in {fill_s:.1f}s" if fill_s else ""),
              flush=True)
        if sum(ends) != args.keys:
            raise SystemExit(f"changelog holds {sum(ends)} records, expected {args.keys}")
        for rep in range(args.repeat):  # interleaved, so broker drift hits every scenario alike
            for scenario in scenarios:
                result = run_scenario(args, scenario, ends)
                runs[scenario].append(result)
                if "error" in result:
                    print(f"  {scenario} #{rep + 1}: FAILED {result['error']}\n{result['stderr']}", flush=True)
                    continue
                print(f"  {scenario} #{rep + 1}: {result['records_per_s']:,.0f} rec/s "
                      f"(replay {result['elapsed_s']:.2f}s, to last write {result['to_last_apply_s']:.2f}s), "
                      f"replayed {result['replayed']}, cpu {result['cpu_s']:.2f}s, "
                      f"rss {result['rss_before_mb']:.0f}->{result['peak_rss_mb']:.0f} MB"
                      + ("" if result["keys_ok"] is None else
                         f", keys {result['key_count']} {'ok' if result['keys_ok'] else 'WRONG'}")
                      + (f"\n    stderr: {result['stderr_warnings']}" if result.get("stderr_warnings") else ""),
                      flush=True)
    finally:
        if not args.keep_topics:
            delete_topics(client, created)
    total_s = time.perf_counter() - started
    summary = {s: summarize(r) for s, r in runs.items()}
    print()
    print_table(summary, args.settle)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    import platform

    out.write_text(json.dumps({
        "benchmark": "recovery",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "broker": args.broker,
        "keys": args.keys,
        "repeat": args.repeat,
        "partitions": PARTITIONS,
        "settle_s": args.settle,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "changelog_fill_s": fill_s,
        "total_s": total_s,
        "summary": summary,
        "runs": runs,
    }, indent=2))
    print(f"\nresults written to {out} (total {total_s:.0f}s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="127.0.0.1:9092", help="HOST:PORT of the Kafka broker")
    parser.add_argument("--keys", type=int, default=1000000, help="changelog records (all distinct keys)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settle", type=float, default=0.3, help="replay()'s quiet period, subtracted in rec/s")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="where to write the results")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per scenario run")
    parser.add_argument("--topic", help="replay an existing, already filled 4-partition topic (not deleted)")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the changelog topic")
    # internal: run one scenario (the parent starts these as subprocesses)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--ends", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenario:
        scenario_main(args)
    else:
        parent_main(args)


if __name__ == "__main__":
    main()
