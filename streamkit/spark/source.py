"""The ``streamkit`` Python data source: Kafka topics as Spark batch and streaming DataFrames.

Options (all strings): ``topic`` (one or a comma-separated list), ``kafka.<setting>`` for the
client (``kafka.bootstrap.servers`` at least), ``startingOffsets`` (``earliest``, ``latest`` or
JSON ``{"topic": {"0": 42}}``), ``endingOffsets`` (batch only: ``latest`` or JSON),
``maxOffsetsPerTrigger``, ``consumeBatchSize`` (records per consume call and Arrow batch,
10,000 by default), ``isolation`` (``read_committed``, the default, or
``read_uncommitted``), ``decode`` with ``app`` (``module:attribute``) to turn values into
columns, ``onDecodeError`` (``fail`` or ``skip``), and ``commitGroup`` (a consumer group the
streaming reader commits its processed offsets to, so a worker can take over from there).
"""
from __future__ import annotations

import json
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import (
    CaseInsensitiveDict,
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from . import kafka_io, rows
from .apps import load_app
from .kafka_io import Offsets, SparkKafkaError


class KafkaRange(InputPartition):
    """One Spark task: ``topic[partition]`` from ``start`` (inclusive) to ``end`` (exclusive)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes")


def _offsets_option(value: str, what: str) -> Offsets:
    try:
        parsed = json.loads(value)
        return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise SparkKafkaError(f"{what} must be earliest, latest or JSON like {{\"topic\": {{\"0\": 42}}}}; "
                              f"got {value!r}") from None


class _Options:
    """The parsed options shared by the readers (picklable: plain data only)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.raw = CaseInsensitiveDict(options)  # Spark hands option names lower-cased
        self.conf = kafka_io.client_config(options)
        self.topics = kafka_io.topics_option(options)
        isolation = options.get("isolation", "read_committed")
        if isolation not in ("read_committed", "read_uncommitted"):
            raise SparkKafkaError(f"isolation must be read_committed or read_uncommitted, not {isolation!r}")
        self.read_committed = isolation == "read_committed"
        self.decode = _truthy(options.get("decode", "false"))
        self.app_spec = options.get("app")
        self.on_decode_error = options.get("onDecodeError", "fail")
        self.consume_batch = int(options.get("consumeBatchSize", "10000"))  # records per consume() and Arrow batch
        if self.on_decode_error not in ("fail", "skip"):
            raise SparkKafkaError("onDecodeError must be fail or skip")
        if self.decode and (not self.app_spec or len(self.topics) != 1):
            raise SparkKafkaError("decode=true needs option app (module:attribute) and exactly one topic")

    def offsets(self, which: str) -> Offsets:
        """``earliest``/``latest`` from the broker, or the JSON given (missing partitions: earliest)."""
        if which in ("earliest", "latest"):
            return kafka_io.list_offsets(self.conf, self.topics, which, read_committed=self.read_committed)
        given = _offsets_option(which, "offsets")
        earliest = kafka_io.list_offsets(self.conf, self.topics, "earliest", read_committed=self.read_committed)
        return {t: {p: given.get(t, {}).get(p, o) for p, o in parts.items()} for t, parts in earliest.items()}

    def topic(self) -> Any:
        """The app's declaration of the (single) topic, for its value codec and type."""
        app = load_app(self.app_spec or "")
        topic = app.topics.get(self.topics[0])
        if topic is None:
            raise SparkKafkaError(f"app {self.app_spec} declares no topic {self.topics[0]!r}")
        return topic

    def read(self, part: KafkaRange, schema: StructType) -> Iterator[Any]:
        arrow_schema = rows.arrow_schema(schema)
        chunks = kafka_io.read_range(self.conf, part.topic, part.partition, part.start, part.end,
                                     read_committed=self.read_committed, batch_size=self.consume_batch)
        if not self.decode:
            for messages in chunks:
                yield rows.raw_batch(messages, arrow_schema)
            return
        decode = self.topic().value_codec.decode
        names = [f.name for f in schema.fields[len(rows.META_FIELDS):]]
        for messages in chunks:
            yield rows.decoded_batch(messages, decode, names, arrow_schema, self.on_decode_error)


def _ranges(start: Offsets, end: Offsets) -> list[KafkaRange]:
    parts = []
    for topic, ends in sorted(end.items()):
        for p, stop in sorted(ends.items(), key=lambda kv: int(kv[0])):
            begin = start.get(topic, {}).get(p, 0)
            if stop > begin:
                parts.append(KafkaRange(topic, int(p), begin, stop))
    return parts


class StreamkitDataSource(DataSource):
    """``spark.read.format("streamkit")`` and ``spark.readStream.format("streamkit")``; writes too."""

    @classmethod
    def name(cls) -> str:
        return "streamkit"

    def schema(self) -> StructType:
        if _truthy(self.options.get("decode", "false")):
            opts = _Options(self.options)
            return rows.decoded_schema(opts.topic().value_type)
        return rows.RAW_SCHEMA

    def reader(self, schema: StructType) -> "BatchReader":
        return BatchReader(_Options(self.options), schema)

    def streamReader(self, schema: StructType) -> "StreamReader":
        return StreamReader(_Options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from .sink import BatchWriter

        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from .sink import StreamWriter

        return StreamWriter(self.options, schema)


class BatchReader(DataSourceReader):
    """A bounded read: end offsets are taken once, when Spark plans the job."""

    def __init__(self, options: _Options, schema: StructType) -> None:
        self.options, self.schema = options, schema
        start = options.offsets(options.raw.get("startingOffsets", "earliest"))
        end = options.offsets(options.raw.get("endingOffsets", "latest"))
        self.ranges = _ranges(start, end)

    def partitions(self) -> Sequence[InputPartition]:
        return self.ranges

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, KafkaRange):  # no range to read: PySpark's placeholder
            return iter(())
        return self.options.read(partition, self.schema)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offset ranges; Spark checkpoints the ``{topic: {partition: offset}}``."""

    def __init__(self, options: _Options, schema: StructType) -> None:
        self.options, self.schema = options, schema
        limit = options.raw.get("maxOffsetsPerTrigger")
        self.max_per_trigger = int(limit) if limit else None
        self.target: Offsets | None = None  # Trigger.AvailableNow: never plan beyond this
        self.commit_group = options.raw.get("commitGroup")

    def initialOffset(self) -> dict:
        return self.options.offsets(self.options.raw.get("startingOffsets", "earliest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self.options.offsets("latest")

    def _available(self, start: Offsets) -> Offsets:
        latest = self.target or self.options.offsets("latest")
        # Never behind start: a broker answering a lower end (or a deleted range) cannot rewind.
        return {t: {p: max(o, start.get(t, {}).get(p, 0)) for p, o in parts.items()} for t, parts in latest.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        available = self._available(start)
        if not isinstance(limit, ReadMaxRows):
            return available
        return cap_offsets(start, available, limit.max_rows)

    def reportLatestOffset(self) -> dict | None:
        return self.target

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return _ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaRange)
        return self.options.read(partition, self.schema)

    def commit(self, end: dict) -> None:
        if self.commit_group:
            kafka_io.commit_group_offsets(self.options.conf, self.commit_group, end)


def cap_offsets(start: Offsets, available: Offsets, max_rows: int) -> Offsets:
    """Advance at most ``max_rows`` in total, shared in proportion to each partition's backlog
    (every partition with a backlog moves by at least one, so none starves)."""
    lags = {(t, p): o - start.get(t, {}).get(p, 0) for t, parts in available.items() for p, o in parts.items()}
    total = sum(lags.values())
    if total <= max_rows:
        return available
    result = {t: dict(start.get(t, {})) for t in available}
    for (t, p), lag in lags.items():
        begin = start.get(t, {}).get(p, 0)
        share = max(1, int(max_rows * lag / total)) if lag > 0 else 0
        result[t][p] = begin + min(lag, share)
    return result
