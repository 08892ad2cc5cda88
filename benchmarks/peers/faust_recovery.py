# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""faust-streaming table recovery peer (runs in the peers venv).

    python faust_recovery.py --broker B --keys K --phase fill|restore --group G [--state-dir D]

App id = consumer group = G; source topic ``G-in`` (4 partitions, created by the caller and left
empty); table ``counts`` (RocksDB store, 4 partitions) whose changelog is faust's
``<app id>-<table name>-changelog`` = ``G-counts-changelog``.

- ``fill``: writes the changelog directly with a plain confluent producer, in the format faust's
  own table writes (table key/value serializer ``json``: key ``b'"key-<i>"'``, value the count,
  e.g. ``b'3'``; no headers), K records with distinct keys, count = 1 + i % 5. Faust's RocksDB
  recovery stores ``message.key``/``message.value`` bytes as they are, one WriteBatch per
  partition per buffered batch, so any producer writing these bytes is restored the same way.
- ``restore``: starts a faust worker with an EMPTY datadir (``--state-dir``). The clock starts
  after imports, before ``faust.App(...)``; it stops in the table's ``on_recover`` callback, which
  faust calls from ``Recovery.on_recovery_completed`` once every active changelog partition has
  reached its high watermark ("Restore complete!"). So the time includes worker start, group
  join, highwater/offset lookups and the restore. Then (untimed) it counts the keys in every
  partition's RocksDB (minus faust's offset key), spot-checks 200 keys through the table's store,
  reads the changelog's record count from the broker, prints ``RESULT {json}`` and exits.
  ``first_batch_s``/``last_batch_s`` (start -> first/last ``apply_changelog_batch``, wrapped on
  the table instance; one batch = ``recovery_buffer_size`` = 1000 events) separate start-up from
  the restore itself.
"""
import json
import os
import random
import sys
import time

from measure import cpu, peak_rss_mb, recovery_args  # peers/ is the script directory

args = recovery_args()
CHANGELOG = f"{args.group}-counts-changelog"
SPOT_CHECKS = 200


def expected(i: int) -> int:
    return 1 + i % 5


def changelog_records() -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args.broker, "group.id": f"{args.group}-probe"})
    md = c.list_topics(CHANGELOG, timeout=10).topics[CHANGELOG]
    total = 0
    for part in md.partitions:
        low, high = c.get_watermark_offsets(TopicPartition(CHANGELOG, part), timeout=10)
        total += high - low
    c.close()
    return total


def fill() -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.broker, "partitioner": "murmur2_random",
                         "linger.ms": 20, "batch.num.messages": 10000})
    started = time.perf_counter()
    for i in range(args.keys):
        while True:
            try:
                producer.produce(CHANGELOG, b"%d" % expected(i), b'"key-%d"' % i)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 20000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise SystemExit("changelog records not delivered")
    print("RESULT " + json.dumps({"scenario": "faust-fill", "mode": "direct changelog write",
                                  "topic": CHANGELOG, "records": changelog_records(),
                                  "elapsed_s": time.perf_counter() - started}), flush=True)


def restore() -> None:
    cpu0, t0 = cpu(), time.perf_counter()
    import faust

    app = faust.App(args.group, broker=f"kafka://{args.broker}", store="rocksdb://", datadir=args.state_dir,
                    topic_partitions=4, web_enabled=False, consumer_auto_offset_reset="earliest",
                    broker_session_timeout=6.0, broker_heartbeat_interval=1.0)
    source = app.topic(f"{args.group}-in", value_serializer="raw", key_serializer="raw")
    counts = app.Table("counts", default=int, partitions=4)

    batches: list = []  # perf_counter() after each applied changelog batch (recovery_buffer_size events)
    apply_batch = counts.apply_changelog_batch

    def timed_apply(batch) -> None:
        apply_batch(batch)
        batches.append(time.perf_counter())

    counts.apply_changelog_batch = timed_apply  # instance attribute: recovery calls table.apply_changelog_batch

    @app.agent(source)
    async def process(stream):  # never sees a record: the source topic is empty
        async for event in stream.events():
            counts[event.key.decode()] += 1

    @counts.on_recover
    async def recovered() -> None:
        elapsed, cpu_s = time.perf_counter() - t0, cpu() - cpu0
        store = counts.data
        keys = sum(1 for db in store._dbs.values() for k in db.keys() if k != store.offset_key)  # noqa: SIM118 (Rdict)
        rng = random.Random(7)
        bad = []
        for i in sorted({0, args.keys - 1, *(rng.randrange(args.keys) for _ in range(SPOT_CHECKS))}):
            try:
                got = store[f"key-{i}"]
            except KeyError:
                got = None
            if got != expected(i):
                bad.append(f"key-{i}: {got!r} != {expected(i)}")
        records = changelog_records()
        os.write(1, ("RESULT " + json.dumps({
            "scenario": "faust-recovery", "records": records, "keys": keys, "elapsed_s": elapsed,
            "records_per_s": records / elapsed, "cpu_s": cpu_s,
            "peak_rss_mb": peak_rss_mb(),
            "verified": keys == args.keys and records == args.keys and not bad, "bad": bad[:5],
            "partitions_restored": sorted(store._dbs), "batches": len(batches),
            "first_batch_s": batches[0] - t0 if batches else None, "last_batch_s": batches[-1] - t0 if batches else None,
            "notes": "clock: before faust.App() -> table on_recover callback (after imports)"}) + "\n").encode())
        os._exit(0)  # no LeaveGroup: the caller waits out the 6 s session timeout before the next run

    sys.argv = [sys.argv[0], "worker", "-l", "warn", "--without-web"]  # CLI default would override web_enabled
    app.main()


if __name__ == "__main__":
    fill() if args.phase == "fill" else restore()
