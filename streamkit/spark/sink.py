"""Writing DataFrames to Kafka: at-least-once batch writes and an exactly-once streaming sink.

Rows follow ``rows.SINK_SCHEMA`` (topic, partition, key, value, headers; missing columns are
null). The ``topic`` option names the topic for rows whose topic is null.

Exactly-once (streaming writes, ``guarantee=exactly_once``, the default there): every task of
micro-batch B writes in one Kafka transaction under ``transactional.id`` =
``<prefix>-<query id>-<B>-<task partition>``, and in the same transaction commits offset B+1 of a
marker partition for its own consumer group ``<prefix>-<query id>-<task partition>``. A replayed
task (a retry, or the whole batch again after a driver crash) first calls ``init_transactions``,
which fences any attempt still alive and settles its transaction, then reads the marker: at B+1
or beyond, the batch's rows are already in Kafka and the task writes nothing.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from . import kafka_io
from .kafka_io import SparkKafkaError

log = logging.getLogger("streamkit.spark.sink")

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark's micro-batch execution on every task
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # the query's id, stable across restarts from a checkpoint


@dataclass
class Written(WriterCommitMessage):
    """What one task did: rows written, or skipped because an earlier attempt committed them."""

    partition: int
    rows: int
    skipped: bool = False


class _Target:
    """Options shared by both writers (plain data, so it pickles to the tasks)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.conf = kafka_io.client_config(options)
        self.topic = options.get("topic")
        self.columns = set(schema.fieldNames())
        if "value" not in self.columns:
            raise SparkKafkaError("a DataFrame written to Kafka needs a value column (binary or string)")
        if "topic" not in self.columns and not self.topic:
            raise SparkKafkaError("set option topic, or give the DataFrame a topic column")
        self.producer_conf = {
            **self.conf, "partitioner": "murmur2_random",  # the placement the worker and Java clients use
            "linger.ms": int(options.get("lingerMs", "5")), "enable.idempotence": True,
            "compression.type": options.get("compression", "none"),
        }

    def produce_all(self, producer: Producer, batches: Iterator[Any]) -> int:
        """Produce every row; returns the count. Delivery errors raise (the task fails and retries)."""
        errors: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        count = 0
        for batch in batches:
            n = batch.num_rows
            names = batch.schema.names

            def column(name: str) -> list[Any] | None:
                if name not in names or batch.column(name).null_count == n:  # noqa: B023 - called only within this iteration
                    return None
                return batch.column(name).to_pylist()  # noqa: B023 - called only within this iteration

            topics, parts, headers = column("topic"), column("partition"), column("headers")
            keys, values = column("key") or [None] * n, column("value") or [None] * n
            if parts is None and headers is None:  # the common case: no per-row dicts
                default = self.topic
                for topic, key, value in zip(topics or [default] * n, keys, values, strict=True):
                    self._produce(producer, topic or default, _bytes(key), _bytes(value), delivered)
            else:
                for i in range(n):
                    extra: dict[str, Any] = {}
                    if parts is not None and parts[i] is not None:
                        extra["partition"] = parts[i]
                    if headers is not None and headers[i]:
                        extra["headers"] = [(h["key"], h["value"]) for h in headers[i]]
                    target = (topics[i] if topics is not None else None) or self.topic
                    self._produce(producer, target, _bytes(keys[i]), _bytes(values[i]), delivered, **extra)
            count += n
            producer.poll(0)
            if errors:
                raise SparkKafkaError(f"delivery failed: {errors[0]}")
        return count

    @staticmethod
    def _produce(producer: Producer, topic: str | None, key: bytes | None, value: bytes | None, delivered: Any,
                 **extra: Any) -> None:
        if topic is None:  # a null in the topic column, and no topic option to fall back on
            raise SparkKafkaError("a row has no topic: give every row a topic, or set option topic for those without")
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=delivered, **extra)
                return
            except BufferError:
                producer.poll(0.05)  # the local queue is full: let deliveries drain

    def write_at_least_once(self, batches: Iterator[Any]) -> int:
        """Produce every row and wait for all deliveries (a retried task may write its rows again)."""
        producer = Producer(self.producer_conf)
        count = self.produce_all(producer, batches)
        self.flush(producer)
        return count

    def flush(self, producer: Producer, timeout: float = 120.0) -> None:
        left = producer.flush(timeout)
        if left:
            raise SparkKafkaError(f"{left} records not delivered within {timeout:.0f} s")


def _bytes(data: Any) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _task_context() -> Any:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise SparkKafkaError("the streamkit sink runs inside Spark tasks only")
    return context


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("streamkit")``: at-least-once (a retried task may write its rows again)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.target = _Target(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return Written(_task_context().partitionId(), self.target.write_at_least_once(iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("streamkit")``: exactly-once per micro-batch (see the module doc)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.target = _Target(options, schema)
        self.exactly_once = options.get("guarantee", "exactly_once") == "exactly_once"
        self.prefix = options.get("transactionalIdPrefix", "streamkit-spark")
        self.marker_topic = options.get("markerTopic") or self.target.topic
        if self.exactly_once and not self.marker_topic:
            raise SparkKafkaError("exactly-once writes need option topic or markerTopic (an existing topic whose "
                                  "partition 0 holds the per-task commit markers)")
        self.timeout_ms = int(options.get("transactionTimeoutMs", "60000"))

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        context = _task_context()
        task = context.partitionId()
        if not self.exactly_once:
            return Written(task, self.target.write_at_least_once(iterator))
        batch_id = int(context.getLocalProperty(BATCH_ID_PROPERTY))
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) or uuid.uuid4().hex
        return self._write_transaction(iterator, query_id, batch_id, task)

    def _write_transaction(self, iterator: Iterator[Any], query_id: str, batch_id: int, task: int) -> Written:
        producer = Producer({**self.target.producer_conf,
                             "transactional.id": f"{self.prefix}-{query_id}-{batch_id}-{task}",
                             "transaction.timeout.ms": self.timeout_ms})
        producer.init_transactions(30)  # fences an earlier attempt and settles its transaction
        group = f"{self.prefix}-{query_id}-{task}"
        marker_topic = self.marker_topic
        assert marker_topic is not None  # exactly-once writes refuse to start without one (__init__)
        marker = TopicPartition(marker_topic, 0)
        consumer = Consumer({**self.target.conf, "group.id": group, "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        try:
            committed = consumer.committed([marker], timeout=30)[0].offset
            if committed >= batch_id + 1:
                log.info("batch %d task %d was committed by an earlier attempt; skipping", batch_id, task)
                for _ in iterator:
                    pass
                return Written(task, 0, skipped=True)
            producer.begin_transaction()
            try:
                count = self.target.produce_all(producer, iterator)
                producer.send_offsets_to_transaction([TopicPartition(marker_topic, 0, batch_id + 1)],
                                                     consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(120)
            except BaseException:
                try:
                    producer.abort_transaction(30)
                except KafkaException:
                    pass  # fenced or broken: the next attempt's init_transactions settles it
                raise
            return Written(task, count)
        finally:
            consumer.close()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written = [m for m in messages if isinstance(m, Written)]
        skipped = sum(1 for m in written if m.skipped)
        log.info("batch %d: %d rows in %d tasks%s", batchId, sum(m.rows for m in written), len(written),
                 f" ({skipped} already committed)" if skipped else "")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Tasks that committed stay committed; their markers make the replay skip them.
        log.warning("batch %d aborted by Spark; committed tasks will be skipped when it is replayed", batchId)
