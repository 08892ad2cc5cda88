"""Joins under SIGKILLs: a stream-table enrichment (with a repartition) and a windowed
stream-stream join, counted against the batch truth.

    python -m tests.chaos.joins --broker 127.0.0.1:29092 --driver confluent --kills 6

Customers go in first, and the run waits until the workers checkpointed all of them (so every
order meets its customer whatever the interleaving); then orders (keyed by order id, joined on
their customer) and lefts/rights (keyed alike, timestamps 10 ms apart, the right 5 ms after its
left) flow while a random worker is SIGKILLed and restarted ``--kills`` times. The truth: each
order once with its customer's name; each (left, right) pair of one key at most 1.5 s apart
exactly once (grace is an hour, so no record is late whatever the replays). With
``--how left``/``outer``, every 50th left (and, outer, right) also has a twin under a key of its
own that nothing pairs with, and one last left per partition, an hour and more later, closes
every window: each such record once, alone, under its own key (the sink's key, from ``yield``,
and the key ``.items()`` gave, checked on every output). exactly_once: the outputs
(read_committed) equal the truth exactly; at_least_once: nothing missing or wrong.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.transport.partitioner import partition_for_key

from .harness import PARTITIONS, Reader, Worker, delete_run_topics, group_lag, sigkill_rounds

BASE_MS = 1_767_225_600_000
WITHIN_MS = 1500
GRACE_MS = 3_600_000
ALONE_EVERY = 50  # every 50th record of a side also has an unpairable twin (left and outer joins)


@dataclass
class JoinSummary:
    driver: str
    guarantee: str
    orders: int
    pairs_expected: int  # pairs, and records alone under left/outer
    how: str = "inner"
    enriched_missing: int = 0
    enriched_duplicated: int = 0
    enriched_wrong: int = 0
    pairs_missing: int = 0
    pairs_duplicated: int = 0
    pairs_spurious: int = 0
    wrong_keys: int = 0  # outputs whose sink key or items() key is not the key of the record(s) they carry
    died: int = 0
    kills: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        lossless = not (self.enriched_missing or self.enriched_wrong or self.pairs_missing or self.pairs_spurious
                        or self.wrong_keys or self.died)
        if self.guarantee == "exactly_once":
            return lossless and not (self.enriched_duplicated or self.pairs_duplicated)
        return lossless

    def line(self) -> str:
        return (f"[joins {self.driver}/{self.guarantee}/{self.how}] orders={self.orders} "
                f"enriched missing={self.enriched_missing} "
                f"duplicated={self.enriched_duplicated} wrong={self.enriched_wrong}; pairs={self.pairs_expected} "
                f"missing={self.pairs_missing} duplicated={self.pairs_duplicated} spurious={self.pairs_spurious} "
                f"wrong keys={self.wrong_keys}; "
                f"died={self.died} kills={self.kills} ({self.seconds:.0f}s) {'OK' if self.ok else 'FAILED'}")


Output = tuple[str, int | None, int | None]  # (key, left id, right id)


def pair_truth(records: int, keys: int, how: str = "inner") -> set[Output]:
    """Left i and right j pair when their keys match and their times are at most 1.5 s apart;
    a left join adds each unpairable left twin alone, an outer join each right twin too."""
    by_key: dict[int, list[int]] = {}
    for j in range(records):
        by_key.setdefault(j % keys, []).append(j)
    truth: set[Output] = set()
    for i in range(records):
        for j in by_key[i % keys]:
            if abs((j * 10 + 5) - i * 10) <= WITHIN_MS:
                truth.add((f"k{i % keys}", i, j))
    twins = range(0, records, ALONE_EVERY)
    if how in ("left", "outer"):
        truth.update((f"lone-left-{i}", i, None) for i in twins)
    if how == "outer":
        truth.update((f"lone-right-{j}", None, j) for j in twins)
    return truth


def closing_keys() -> dict[int, str]:
    """A key of each partition (Kafka's murmur2 placement), for the records that close the windows."""
    keys: dict[int, str] = {}
    n = 0
    while len(keys) < PARTITIONS:
        key = f"closer-{n}"
        keys.setdefault(partition_for_key(key.encode(), PARTITIONS), key)
        n += 1
    return keys


def _feed(broker: str, topics: dict[str, str], records: int, customers: int, keys: int, seconds: float,
          stop: threading.Event, how: str) -> None:
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "partitioner": "murmur2_random",
                         "enable.idempotence": True, "message.timeout.ms": 0})
    chunk = 200
    pause = seconds / max(1, records / chunk)
    for i in range(records):
        order = {"id": i, "customer": f"c{i % customers}"}
        producer.produce(topics["orders"], key=f"o{i}".encode(), value=orjson.dumps(order))
        key = f"k{i % keys}".encode()
        producer.produce(topics["lefts"], key=key, value=orjson.dumps({"id": i}), timestamp=BASE_MS + i * 10)
        producer.produce(topics["rights"], key=key, value=orjson.dumps({"id": i}), timestamp=BASE_MS + i * 10 + 5)
        if how != "inner" and i % ALONE_EVERY == 0:
            for side in ("left", "right"):
                producer.produce(topics[f"{side}s"], key=f"lone-{side}-{i}".encode(), value=orjson.dumps({"id": i}),
                                 timestamp=BASE_MS + i * 10 + (5 if side == "right" else 0))
        if i % chunk == chunk - 1:
            producer.poll(0)
            if stop.wait(pause):
                break
    if how != "inner" and not stop.is_set():  # past every window's end + grace: each partition's twins leave
        closing = BASE_MS + records * 10 + WITHIN_MS + GRACE_MS + 60_000
        for partition, key in closing_keys().items():
            producer.produce(topics["lefts"], key=key.encode(), value=orjson.dumps({"id": -1}), partition=partition,
                             timestamp=closing)
    if producer.flush(900):
        raise RuntimeError("the feeder could not deliver every input")


def run(broker: str, driver: str, *, guarantee: str = "exactly_once", how: str = "inner", records: int = 20000,
        customers: int = 500,
        keys: int = 100, kills: int = 6, workers: int = 3, interval: float = 4.0, drain_timeout: float = 300.0,
        workdir: Path | None = None, seed: int | None = None, log=print) -> JoinSummary:
    rng = random.Random(seed)
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"{name}-{suffix}" for name in ("customers", "orders", "lefts", "rights", "enriched", "matched")}
    app_id = f"chaos-joins-{suffix}"
    workdir = Path(workdir or tempfile.mkdtemp(prefix="streamkit-chaos-joins-"))
    workdir.mkdir(parents=True, exist_ok=True)
    truth_pairs = pair_truth(records, keys, how)
    summary = JoinSummary(driver, guarantee, records, len(truth_pairs), how=how)
    exact = guarantee == "exactly_once"
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": broker})
    # the records' times start at BASE_MS, older than Kafka's default 7-day time retention: without
    # retention.ms=-1 the broker's retention check (every 5 minutes) deleted inputs mid-run
    keep = {"retention.ms": "-1"}
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1, config=keep) for t in topics.values()]).values():
        future.result(15)
    # murmur2: the Java client's partitioner, which streamkit's tables use to place a key
    producer = Producer({"bootstrap.servers": broker, "enable.idempotence": True, "partitioner": "murmur2_random"})
    for c in range(customers):
        producer.produce(topics["customers"], key=f"c{c}".encode(), value=orjson.dumps({"name": f"name-{c}"}))
    producer.flush(60)
    env = {"JOIN_APP_ID": app_id, "JOIN_TOPIC_SUFFIX": suffix, "JOIN_HOW": how}
    pool = [Worker(i, broker, driver, guarantee, {"app": app_id, "in": "", "out": ""}, workdir,
                   app="tests.chaos.join_app:app", env=env) for i in range(workers)]
    for worker in pool:
        worker.start()
    deadline = time.monotonic() + 120
    while group_lag(broker, app_id, topics["customers"]) > 0:  # every customer in the table, checkpointed
        if time.monotonic() > deadline:
            raise RuntimeError(f"the workers did not checkpoint the customers within 120 s (logs in {workdir})")
        time.sleep(0.5)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(broker, topics, records, customers, keys,
                                                  max(kills * interval, 5.0), stop, how), daemon=True)
    feeder.start()
    enriched = Reader(broker, topics["enriched"], committed=exact)
    matched = Reader(broker, topics["matched"], committed=exact)
    try:
        enriched.poll(3.0)
        def poll(seconds: float) -> None:
            matched.poll(seconds / 2)
            enriched.poll(seconds / 2)

        summary.kills += sigkill_rounds(pool, kills, rng, interval, poll,
                                        lambda: f"enriched so far {len(enriched.records)}", log)
        feeder.join(600)
        deadline = time.monotonic() + drain_timeout
        while time.monotonic() < deadline:
            enriched.poll(1.0)
            matched.poll(0.5)
            if (len({m.key() for m in enriched.records}) >= records and len(matched.records) >= len(truth_pairs)
                    and all(group_lag(broker, app_id, topics[t]) == 0 for t in ("orders", "lefts", "rights"))):
                break
        summary.died = sum(1 for w in pool if not w.running)
        for worker in pool:
            worker.stop()
        enriched.drain()
        matched.drain()
    finally:
        stop.set()
        for worker in pool:
            worker.kill()
        enriched.close()
        matched.close()
    got = [orjson.loads(m.value()) for m in enriched.records]
    ids = [o["id"] for o in got]
    summary.enriched_missing = len(set(range(records)) - set(ids))
    summary.enriched_duplicated = len(ids) - len(set(ids))
    summary.enriched_wrong = sum(1 for o in got if o["name"] != f"name-{o['id'] % customers}")
    pairs: list[Output] = []
    for m in matched.records:
        items_key, left, right = orjson.loads(m.value())
        sink_key = m.key().decode()
        pairs.append((items_key, left, right))
        expected_key = f"k{left % keys}" if left is not None and right is not None else None
        if sink_key != items_key or (expected_key is not None and items_key != expected_key):
            summary.wrong_keys += 1  # a lone twin's own key is in the truth: a wrong one is also spurious
    summary.pairs_missing = len(truth_pairs - set(pairs))
    summary.pairs_duplicated = len(pairs) - len(set(pairs))
    summary.pairs_spurious = len(set(pairs) - truth_pairs)
    summary.seconds = time.monotonic() - started
    if summary.ok:  # a failed run's topics stay for whoever looks next
        delete_run_topics(broker, suffix)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.joins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--driver", choices=["aiokafka", "confluent"], default="confluent")
    parser.add_argument("--guarantee", choices=["at_least_once", "exactly_once"], default="exactly_once")
    parser.add_argument("--how", choices=["inner", "left", "outer"], default="inner")
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    summary = run(args.broker, args.driver, guarantee=args.guarantee, how=args.how, records=args.records,
                  kills=args.kills,
                  seed=args.seed, workdir=args.workdir)
    print(summary.line())
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
