# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Quix Streams table recovery peer (runs in the peers venv).

    python quix_recovery.py --broker B --keys K --phase fill|restore --group G [--state-dir D]

Consumer group G; input topic ``G-in`` (4 partitions, created and filled by the caller with K
records, keys ``key-<i>`` all distinct, JSON values); the count-per-key app keeps ``count`` in the
default RocksDB store, whose changelog Quix names ``changelog__G--G-in--default``.

- ``fill``: runs the Quix app itself over the K input records (at-least-once) and stops after the
  K-th (``app.stop()`` commits the last checkpoint, which produces the changelog). Quix's
  changelog records carry headers (column family, processed source offsets) that recovery checks
  against the group's committed offsets, so they are produced by Quix, not written by hand.
- ``restore``: the same app with the same group and an EMPTY ``--state-dir``. The clock starts
  after imports, before ``Application(...)``; it stops when ``StateStoreManager.do_recovery()``
  returns (wrapped on the instance) and no recovery is pending any more — i.e. Quix's
  RecoveryManager has seen every changelog partition reach its high watermark and logged
  "Recovery process complete!". Quix only checks positions after an empty ``poll(1)``, so up to
  ~1 s of idle polling at the end is part of its recovery time. Then (untimed, partitions still
  assigned) it counts the keys in each store partition's default column family, spot-checks 200
  keys through a Quix transaction (``count`` under prefix ``key-<i>`` must be 1), reads the
  changelog record count from the broker, stops the app and prints ``RESULT {json}``.
  ``recovery_call_s`` (start -> ``do_recovery()`` called) separates start-up (group join,
  committed/watermark look-ups on assignment) from the restore itself.
"""
import json
import random
import shutil
import tempfile
import time

from measure import cpu, peak_rss_mb, recovery_args  # peers/ is the script directory

args = recovery_args()
INPUT = f"{args.group}-in"
CHANGELOG = f"changelog__{args.group}--{INPUT}--default"
SPOT_CHECKS = 200


def changelog_records() -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args.broker, "group.id": f"{args.group}-probe"})
    md = c.list_topics(CHANGELOG, timeout=10).topics[CHANGELOG]
    total = sum(high - low for low, high in (
        c.get_watermark_offsets(TopicPartition(CHANGELOG, part), timeout=10) for part in md.partitions))
    c.close()
    return total


def count(value, st):
    total = st.get("count", 0) + 1
    st.set("count", total)
    return {"user": value["user"], "count": total}


def verify(app) -> dict:
    stores = [s for by_name in app._state_manager.stores.values() for s in by_name.values()]
    parts = [part for store in stores for part in store.partitions.values()]
    keys = sum(1 for part in parts for _ in part.iter_items(lower_bound=b""))
    rng = random.Random(7)
    bad = []
    for i in sorted({0, args.keys - 1, *(rng.randrange(args.keys) for _ in range(SPOT_CHECKS))}):
        found = [v for v in (part.begin().get("count", prefix=b"key-%d" % i) for part in parts) if v is not None]
        if found != [1]:
            bad.append(f"key-{i}: {found!r}")
    return {"keys": keys, "bad": bad[:5], "store_partitions": len(parts)}


def main() -> None:
    cpu0, t0 = cpu(), time.perf_counter()
    from quixstreams import Application

    state_dir = args.state_dir or tempfile.mkdtemp(prefix="quix-fill-")
    app = Application(broker_address=args.broker, consumer_group=args.group, auto_offset_reset="earliest",
                      processing_guarantee="at-least-once", state_dir=state_dir, loglevel="WARNING")
    sdf = app.dataframe(app.topic(INPUT, value_deserializer="json"))
    result: dict = {}

    if args.phase == "fill":
        seen = {"n": 0}

        def note(value):
            seen["n"] += 1
            if seen["n"] >= args.keys:
                app.stop()
            return value

        sdf = sdf.apply(count, stateful=True).apply(note)
        app.run()
        result = {"scenario": "quix-fill", "mode": "quix app", "consumed": seen["n"], "topic": CHANGELOG,
                  "records": changelog_records(), "elapsed_s": time.perf_counter() - t0}
        if not args.state_dir:
            shutil.rmtree(state_dir, ignore_errors=True)
    else:
        sdf.apply(count, stateful=True)
        manager = app._state_manager
        original = manager.do_recovery

        def timed_recovery():
            result.setdefault("recovery_call_s", time.perf_counter() - t0)
            original()
            if "elapsed_s" in result or manager.recovery_required:
                return  # interrupted (e.g. rebalance): the run loop calls us again
            elapsed, cpu_s = time.perf_counter() - t0, cpu() - cpu0
            result.update(scenario="quix-recovery", elapsed_s=elapsed, cpu_s=cpu_s, **verify(app))
            app.stop()

        manager.do_recovery = timed_recovery
        app.run()
        if "elapsed_s" not in result:
            raise SystemExit("the app stopped without a recovery")
        records = changelog_records()
        result.update(records=records, records_per_s=records / result["elapsed_s"],
                      verified=result["keys"] == args.keys and records == args.keys and not result["bad"],
                      notes="clock: before Application() -> StateStoreManager.do_recovery() returned (after imports)")
    result["peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
