"""Spark numbers for the closing note: batch read rows/s, and one agent on Spark vs the worker.

``python -m benchmarks.spark_bench --broker HOST:PORT --records 1000000`` produces N orders, then
measures in one run: a plain confluent consumer reading them (the ceiling), a Spark batch read
of the topic through the ``streamkit`` data source (local[2]), the stateless agent below run by
Spark (available-now, exactly-once sink) and the same agent run by the asyncio worker
(confluent driver, at-least-once), and the same step as a columnar agent run by Spark
(``spark_columnar_vs_function``: over the plain-function agent's rate on Spark). Session start-up
is excluded; query start-up is included.
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

from .pipeline import Order, ProcessedOrder  # the pipeline's own records

RUN = os.environ.setdefault("SPARK_BENCH_RUN", uuid.uuid4().hex[:6])
BROKER = os.environ.setdefault("SPARK_BENCH_BROKER", "127.0.0.1:9092")
PARTITIONS = 4

app = sk.App(f"spark-bench-{RUN}", broker=f"kafka://{BROKER}", driver="confluent", topic_partitions=PARTITIONS,
             web_enabled=False, session_timeout_ms=6000, heartbeat_interval_ms=1000)


AGENT_DETAIL: dict[str, float] = {}
orders = app.topic(f"spark-bench-orders-{RUN}", key_type=str, value_type=Order)
processed = app.topic(f"spark-bench-processed-{RUN}", key_type=str, value_type=ProcessedOrder)


@app.agent(orders, sink=[processed])
def process(order: Order) -> ProcessedOrder:
    """The benchmark pipeline's stateless step: decode, add a field, encode."""
    return ProcessedOrder(order.id, order.user, order.amount, order.ts, True)


# The same step over a pyarrow RecordBatch (agents/columnar.py), in an app of its own so the
# worker figure above runs the plain-function agent alone.
columnar_app = sk.App(f"spark-bench-columnar-{RUN}", broker=f"kafka://{BROKER}", driver="confluent",
                      topic_partitions=PARTITIONS, web_enabled=False)
columnar_processed = columnar_app.topic(f"spark-bench-processed-columnar-{RUN}", key_type=str,
                                        value_type=ProcessedOrder)


@columnar_app.agent(columnar_app.topic(orders.name, key_type=str, value_type=Order), sink=[columnar_processed],
                    columnar=True)
def process_batch(batch: Any) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [batch.column("key"), batch.column("id"), batch.column("user"), batch.column("amount"), batch.column("ts"),
         pa.repeat(True, batch.num_rows)], names=["key", "id", "user", "amount", "ts", "processed"])


def produce(n: int) -> None:
    from confluent_kafka import Producer

    asyncio.run(app.ensure_topics())
    producer = Producer(confluent_conf(app.conf, **{"partitioner": "murmur2_random", "linger.ms": 20,
                                                    "batch.num.messages": 10000,
                                                    "queue.buffering.max.messages": 500000}))
    for i in range(n):
        user = f"user{i % 1000}"
        producer.produce(orders.name, key=user.encode(), value=Order(i, user, float(i % 100), 1.7e9 + i).dumps())
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120):  # records still queued: the run would measure a partial input
        raise SystemExit(f"spark_bench: not every one of {n} orders reached {BROKER} within 120 s")


def raw_read(n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": BROKER, "group.id": f"raw-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                         "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024})
    consumer.assign([TopicPartition(orders.name, p, 0) for p in range(PARTITIONS)])
    start, seen = time.perf_counter(), 0
    while seen < n:
        seen += sum(1 for m in consumer.consume(10000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return n / elapsed


def spark_read(n: int) -> float:
    from pyspark.sql import functions as F

    start = time.perf_counter()
    row = app.spark.read_topic(orders).agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()[0]
    elapsed = time.perf_counter() - start
    assert row.n == n, (row.n, n)
    return n / elapsed


def spark_read_fixed_seconds() -> float:
    """The same read over one record per partition: what a read costs before any row (planning,
    Python worker start-up), so the per-row rate can be told apart from it."""
    one = json.dumps({orders.name: {str(p): 1 for p in range(PARTITIONS)}})
    start = time.perf_counter()
    app.spark.read_topic(orders, endingOffsets=one).count()
    return time.perf_counter() - start


def spark_agent(n: int, on: sk.App = app, agent: str = "process") -> float:
    checkpoint = tempfile.mkdtemp(prefix="spark-bench-")
    try:
        start = time.perf_counter()
        query = on.spark.run(agent, checkpoint=checkpoint, trigger="available-now", handoff=False)
        query.awaitTermination()
        elapsed = time.perf_counter() - start
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert rows == n, (rows, n)
        batch_ms = sum(p["durationMs"].get("addBatch", 0) for p in query.recentProgress)
        AGENT_DETAIL.update({f"{agent}_batches": len(query.recentProgress),
                             f"{agent}_add_batch_seconds": batch_ms / 1000, f"{agent}_query_seconds": elapsed})
        return n / elapsed
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def written(topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": BROKER, "group.id": "watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(PARTITIONS))
    finally:
        consumer.close()


def worker_agent(n: int) -> float:
    before = written(processed.name)  # Spark's outputs went to the same topic

    async def go() -> float:
        start = time.perf_counter()
        async with app.running():
            while written(processed.name) - before < n:  # outputs in Kafka, not just records fetched
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - start
        return n / elapsed

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", default=BROKER)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "spark.json"))
    args = parser.parse_args()
    if args.broker != BROKER:
        raise SystemExit("set SPARK_BENCH_BROKER (Spark's Python workers read it) instead of --broker")
    app.spark_spec = "benchmarks.spark_bench:app"  # Spark's workers import it (this file runs as __main__)
    columnar_app.spark_spec = "benchmarks.spark_bench:columnar_app"
    produce(args.records)
    _ = app.spark.session  # start-up excluded from every figure
    columnar_app.spark.use(app.spark.session)
    results = {"records": args.records, "raw_confluent_read": raw_read(args.records),
               "spark_batch_read": spark_read(args.records), "spark_read_fixed_seconds": spark_read_fixed_seconds(),
               "spark_agent": spark_agent(args.records),
               "spark_columnar_agent": spark_agent(args.records, columnar_app, "process_batch"),
               "worker_agent": worker_agent(args.records)}
    results["spark_agent_detail"] = AGENT_DETAIL
    results["spark_read_vs_raw"] = results["spark_batch_read"] / results["raw_confluent_read"]
    results["spark_agent_vs_worker"] = results["spark_agent"] / results["worker_agent"]
    results["spark_columnar_vs_function"] = results["spark_columnar_agent"] / results["spark_agent"]
    print(json.dumps(results, indent=2))
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
