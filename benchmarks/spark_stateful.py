"""Stateful agents on a Spark standalone cluster against the worker, on the same input, in one run.

``SPARK_BENCH_BROKER=HOST:PORT python -m benchmarks.spark_stateful --records 1000000`` produces N
orders keyed by user (4 partitions, 1,000 users, event time 1 s apart) and 1,000 user profiles,
starts a cluster on loopback (a master and two workers of one core each, as the tests do), then
for each scenario runs the agent with ``app.spark.run(..., trigger="available-now")`` on the
cluster (query start-up included, session start-up not) and the same agent on the asyncio worker
(confluent driver, until it committed every record), and reports records/s and the ratio:

- ``count``: ``counts[order.user] += 1`` (a table agent, per key on Spark);
- ``window``: a tumbling hour per user over the order's own time with ``.final(topic)``
  (per table partition on Spark);
- ``join``: each order with its user's profile (``stream.join(profiles, how="left")``), the
  profiles' changelog read beside the orders on Spark.

Each scenario is its own app (own group, own tables) over the one orders topic.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import streamkit as sk
from streamkit.testing import confluent_conf

from .pipeline import Order

RUN = os.environ.setdefault("SPARK_BENCH_RUN", uuid.uuid4().hex[:6])
BROKER = os.environ.setdefault("SPARK_BENCH_BROKER", "127.0.0.1:9092")
PARTITIONS = 4
USERS = 1000


class Profile(sk.Record):
    user: str
    country: str


def _app(scenario: str) -> sk.App:
    return sk.App(f"spark-stateful-{scenario}-{RUN}", broker=f"kafka://{BROKER}", driver="confluent",
                  topic_partitions=PARTITIONS, web_enabled=False, session_timeout_ms=6000,
                  heartbeat_interval_ms=1000)


count_app, window_app, join_app = _app("count"), _app("window"), _app("join")
ORDERS = f"spark-stateful-orders-{RUN}"
PROFILES = f"spark-stateful-profiles-{RUN}"

count_orders = count_app.topic(ORDERS, key_type=str, value_type=Order)
counts = count_app.Table("counts", default=int)


@count_app.agent(count_orders)
async def count(stream: Any) -> None:
    async for order in stream:
        counts[order.user] += 1


window_orders = window_app.topic(ORDERS, key_type=str, value_type=Order)
hourly = (window_app.Table("hourly", default=int).tumbling(3600).relative_to_field(Order.ts)
          .final(window_app.topic(f"spark-stateful-hourly-{RUN}", key_type=str)))


@window_app.agent(window_orders)
async def window(stream: Any) -> None:
    async for order in stream:
        hourly[order.user] += 1


join_orders = join_app.topic(ORDERS, key_type=str, value_type=Order)
profiles_in = join_app.topic(PROFILES, key_type=str, value_type=Profile)
enriched = join_app.topic(f"spark-stateful-enriched-{RUN}", key_type=str)
profiles = join_app.Table("profiles", value_type=Profile)


@join_app.agent(profiles_in)
async def keep_profiles(stream: Any) -> None:
    async for profile in stream:
        profiles[profile.user] = profile


@join_app.agent(join_orders, sink=[enriched])
async def join(stream: Any) -> Any:
    async for order, profile in stream.join(profiles, how="left"):
        yield {"id": order.id, "country": profile.country if profile else None}


APPS = {"count": count_app, "window": window_app, "join": join_app}


def produce(n: int) -> None:
    from confluent_kafka import Producer

    for app in APPS.values():
        asyncio.run(app.ensure_topics())
    producer = Producer(confluent_conf(count_app.conf, **{"partitioner": "murmur2_random", "linger.ms": 20,
                                                          "batch.num.messages": 10000,
                                                          "queue.buffering.max.messages": 500000}))
    for u in range(USERS):
        producer.produce(PROFILES, key=f"user{u}".encode(), value=Profile(f"user{u}", f"c{u % 40}").dumps())
    for i in range(n):
        user = f"user{i % USERS}"
        producer.produce(ORDERS, key=user.encode(), value=Order(i, user, float(i % 100), 1.7e9 + i).dumps())
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise SystemExit(f"spark_stateful: not every record reached {BROKER} within 120 s")


def on_spark(app: sk.App, agent: str, n: int) -> dict[str, Any]:
    checkpoint = tempfile.mkdtemp(prefix="spark-stateful-")
    try:
        start = time.perf_counter()
        query = app.spark.run(agent, checkpoint=checkpoint, trigger="available-now", handoff=False)
        query.awaitTermination()
        elapsed = time.perf_counter() - start
        rows = sum(p["numInputRows"] for p in query.recentProgress)  # the table's changelog too, for a join
        return {"records": rows, "complete": rows >= n, "seconds": round(elapsed, 2), "rate": round(n / elapsed)}
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def on_worker(app: sk.App, n: int) -> dict[str, Any]:
    """The app's agents on the asyncio worker until the orders' offsets are all committed."""
    async def go() -> float:
        start = time.perf_counter()
        async with app.running():
            deadline = time.monotonic() + 900
            while sum(o for tp, o in app.runtime.checkpoint.committed.items() if tp.topic == ORDERS) < n:
                if time.monotonic() > deadline:
                    raise SystemExit(f"spark_stateful: the worker of {app.id} did not finish in 900 s")
                await asyncio.sleep(0.05)
            return time.perf_counter() - start

    elapsed = asyncio.run(go())
    return {"seconds": round(elapsed, 2), "rate": round(n / elapsed)}


def main() -> None:
    from tests.spark.cluster import standalone_cluster

    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "spark-stateful.json"))
    args = parser.parse_args()
    produce(args.records)
    results: dict[str, Any] = {"records": args.records, "broker": BROKER, "partitions": PARTITIONS,
                               "cluster": "standalone, 2 workers x 1 core, 1 GiB",
                               "shuffle_partitions": args.shuffle_partitions}
    with standalone_cluster(workers=2) as master:
        # PYTHONPATH: a checkout's streamkit on the executors too, not the one installed in the venv
        env = {f"spark.executorEnv.{name}": os.environ[name] for name in ("SPARK_BENCH_RUN", "SPARK_BENCH_BROKER",
                                                                           "PYTHONPATH") if name in os.environ}
        conf = {**env, "spark.sql.shuffle.partitions": str(args.shuffle_partitions)}
        for name, app in APPS.items():
            app.spark_spec = f"benchmarks.spark_stateful:{name}_app"  # this file runs as __main__
            app.spark.master, app.spark.conf = master, conf
        _ = join_app.spark.session  # start-up excluded from every figure
        for app in APPS.values():
            app.spark.use(join_app.spark.session)
        on_spark(join_app, "keep_profiles", USERS)  # the join's table, loaded before it is timed
        for name, app in APPS.items():
            spark = on_spark(app, name, args.records)
            results[name] = {"spark": spark}
    for name, app in APPS.items():
        results[name]["worker"] = worker = on_worker(app, args.records)
        results[name]["spark_vs_worker"] = round(results[name]["spark"]["rate"] / worker["rate"], 3)
    print(json.dumps(results, indent=2))
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
