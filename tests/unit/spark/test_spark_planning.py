"""Spark planning without a session: admission control and schemas derived from Records."""
import datetime as dt
import enum
from typing import Optional

import pytest

import streamkit as sk

pytest.importorskip("pyspark")

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from streamkit.errors import ConfigurationError  # noqa: E402
from streamkit.spark.rows import decoded_schema, record_struct, to_plain  # noqa: E402
from streamkit.spark.source import _ranges, cap_offsets  # noqa: E402


def test_cap_shares_the_limit_by_backlog_and_never_exceeds_what_is_available():
    start = {"t": {"0": 100, "1": 0, "2": 50}}
    available = {"t": {"0": 1100, "1": 100, "2": 50}}
    capped = cap_offsets(start, available, 550)
    assert capped == {"t": {"0": 600, "1": 50, "2": 50}}
    assert cap_offsets(start, available, 5000) == available
    tiny = cap_offsets(start, available, 1)  # every partition with a backlog moves
    assert tiny["t"]["0"] == 101 and tiny["t"]["1"] == 1 and tiny["t"]["2"] == 50


def test_a_new_partition_starts_at_zero_and_empty_ranges_are_not_planned():
    parts = _ranges({"t": {"0": 5}}, {"t": {"0": 5, "1": 3}})
    assert [(p.topic, p.partition, p.start, p.end) for p in parts] == [("t", 1, 0, 3)]


class Colour(enum.Enum):
    RED = "red"


class Address(sk.Record):
    city: str


class Customer(sk.Record):
    name: str
    age: int
    score: float
    vip: bool
    joined: dt.datetime
    tags: list[str]
    attrs: dict[str, int]
    address: Address
    colour: Colour
    nickname: Optional[str] = None


def test_record_fields_become_spark_columns():
    struct = record_struct(Customer)
    types = {f.name: f.dataType for f in struct.fields}
    assert types["name"] == StringType() and types["age"] == LongType() and types["score"] == DoubleType()
    assert types["vip"] == BooleanType() and types["joined"] == TimestampType()
    assert types["tags"] == ArrayType(StringType()) and types["attrs"] == MapType(StringType(), LongType())
    assert isinstance(types["address"], StructType) and types["colour"] == StringType()
    assert struct["nickname"].nullable and not struct["name"].nullable
    assert decoded_schema(Customer).fieldNames()[:6] == ["topic", "partition", "offset", "timestamp", "key", "headers"]
    value = Customer("a", 1, 2.0, True, dt.datetime(2026, 1, 1), ["x"], {"k": 1}, Address("Oslo"), Colour.RED)
    assert to_plain(value.address) == {"city": "Oslo"} and to_plain(value.colour) == "red"


def test_fields_named_like_metadata_columns_are_refused():
    class Event(sk.Record):
        offset: int

    with pytest.raises(ConfigurationError, match="offset"):
        decoded_schema(Event)


def test_an_isolation_other_than_the_two_kafka_levels_is_refused():
    from streamkit.spark.kafka_io import SparkKafkaError
    from streamkit.spark.source import _Options

    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}
    assert _Options({**base, "isolation": "read_uncommitted"}).read_committed is False
    assert _Options(base).read_committed is True
    with pytest.raises(SparkKafkaError, match="read_committed or read_uncommitted"):
        _Options({**base, "isolation": "uncommitted"})  # was read committed, silently
