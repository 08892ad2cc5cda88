"""Synchronous Kafka access for Spark's driver and tasks (librdkafka through confluent-kafka).

Spark calls data sources from plain threads and worker processes, so this module uses the
blocking client directly instead of the worker's asyncio drivers. Options reach it as strings:
every ``kafka.<name>`` option of a read or write becomes librdkafka setting ``<name>``.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterator, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..errors import StreamkitError

Offsets = dict[str, dict[str, int]]  # {topic: {partition (as str, JSON keys): offset}}
KAFKA_PREFIX = "kafka."


class SparkKafkaError(StreamkitError):
    """A Kafka read or write inside a Spark job could not be completed."""


def client_config(options: Mapping[str, str]) -> dict[str, Any]:
    """``kafka.<name>`` options → librdkafka settings; ``bootstrap.servers`` is required."""
    conf = {k[len(KAFKA_PREFIX):]: v for k, v in options.items() if k.lower().startswith(KAFKA_PREFIX)}
    if "bootstrap.servers" not in conf:
        raise SparkKafkaError("the streamkit data source needs option kafka.bootstrap.servers "
                              "(app.spark sets it from the app's broker)")
    return conf


def topics_option(options: Mapping[str, str]) -> list[str]:
    names = [t.strip() for t in str(options.get("topic") or options.get("subscribe") or "").split(",") if t.strip()]
    if not names:
        raise SparkKafkaError("option topic (one topic or a comma-separated list) is required")
    return names


def _admin(conf: dict[str, Any]) -> AdminClient:
    return AdminClient({"log_level": 4, **conf})  # no info lines about purged events on exit


def partitions_of(conf: dict[str, Any], topics: list[str], timeout: float = 15.0) -> dict[str, int]:
    """Partition count of each topic; a missing topic is an error naming it."""
    metadata = _admin(conf).list_topics(timeout=timeout)
    counts: dict[str, int] = {}
    for name in topics:
        info = metadata.topics.get(name)
        if info is None or info.error is not None or not info.partitions:
            reason = info.error if info is not None and info.error is not None else "no such topic"
            raise SparkKafkaError(f"topic {name!r} cannot be read: {reason}")
        counts[name] = len(info.partitions)
    return counts


def list_offsets(conf: dict[str, Any], topics: list[str], which: str, *, read_committed: bool = True,
                 timeout: float = 15.0) -> Offsets:
    """Earliest or latest offsets of every partition; ``latest`` is the last stable offset when
    reading committed data, so an open transaction's records are not planned into a batch."""
    counts = partitions_of(conf, topics, timeout)
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
    request = {TopicPartition(t, p): spec for t, n in counts.items() for p in range(n)}
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    admin = _admin(conf)  # kept referenced until every future resolved
    futures = admin.list_offsets(request, isolation_level=level, request_timeout=timeout)
    result: Offsets = {t: {} for t in counts}
    for tp, future in futures.items():
        try:
            result[tp.topic][str(tp.partition)] = future.result(timeout=timeout).offset
        except KafkaException as exc:
            raise SparkKafkaError(f"cannot list {which} offsets of {tp.topic}[{tp.partition}]: {exc}") from None
    return result


def read_range(conf: dict[str, Any], topic: str, partition: int, start: int, end: int, *, read_committed: bool,
               batch_size: int = 10_000, idle_timeout: float = 60.0) -> Iterator[list[Any]]:
    """Messages of ``topic[partition]`` in ``[start, end)``, in lists of up to ``batch_size``.

    Ends when the offset ``end - 1`` was passed, or the partition's end (EOF event) is at or
    beyond ``end`` (the last offsets may be transaction markers, never delivered). Raises
    rather than return a short range when nothing arrives for ``idle_timeout`` seconds.
    """
    if end <= start:
        return
    consumer = Consumer({
        **conf, "group.id": f"streamkit-spark-reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "fetch.queue.backoff.ms": 10,  # librdkafka's 1 s default starves a consume loop (docs/architecture.md)
        **{k: v for k, v in conf.items() if k.startswith("fetch.")},  # unless the job sets its own
    })
    try:
        consumer.assign([TopicPartition(topic, partition, start if start >= 0 else OFFSET_BEGINNING)])
        last_progress = time.monotonic()
        while True:
            messages = consumer.consume(batch_size, 0.5)
            out, done = [], False
            for msg in messages:
                err = msg.error()
                offset = msg.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        assert offset is not None  # the event carries the partition's end
                        done = done or offset >= end
                        continue
                    raise SparkKafkaError(f"reading {topic}[{partition}]: {err}")
                assert offset is not None  # a fetched record has its offset
                if offset >= end:
                    done = True
                    break
                out.append(msg)
                done = offset >= end - 1
            if out:
                last_progress = time.monotonic()
                yield out
            if done:
                return
            if not out and time.monotonic() - last_progress > idle_timeout:
                raise SparkKafkaError(
                    f"reading {topic}[{partition}] {start}..{end}: nothing arrived for {idle_timeout:.0f} s "
                    f"(records deleted by retention, or the broker is unreachable)")
    finally:
        consumer.close()


def commit_group_offsets(conf: dict[str, Any], group: str, offsets: Offsets, timeout: float = 15.0) -> None:
    """Commit ``offsets`` for ``group`` without joining it, so a worker of that group resumes there."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, int(p), o) for t, parts in offsets.items() for p, o in parts.items()]
        if tps:
            consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()
