"""Spark schemas for Kafka records, and Arrow batches built from messages.

Raw rows carry the record as Kafka has it; ``decode=True`` rows replace ``value`` with one
column per field of the topic's Record type, so Spark SQL can filter and aggregate on them.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import types
import typing
import uuid
from typing import Any, Callable

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..errors import ConfigurationError

META_FIELDS = ["topic", "partition", "offset", "timestamp", "key", "headers"]
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
RAW_SCHEMA = StructType([
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("offset", LongType(), False),
    StructField("timestamp", TimestampType(), True),
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("headers", HEADERS_TYPE, True),
])
# What the sink takes: one row per record to write; topic null means the write's topic option.
SINK_SCHEMA = StructType([
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("headers", HEADERS_TYPE, True),
])

_SCALARS: dict[Any, DataType] = {
    str: StringType(), int: LongType(), float: DoubleType(), bool: BooleanType(), bytes: BinaryType(),
    dt.datetime: TimestampType(), dt.date: DateType(), decimal.Decimal: StringType(), uuid.UUID: StringType(),
}


def spark_type(tp: Any, where: str) -> tuple[DataType, bool]:
    """The Spark type of a field's annotation, and whether it may be null."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return spark_type(inner[0], where)[0], True
        return StringType(), True  # a union of several types: kept as its JSON text
    if tp in _SCALARS:
        return _SCALARS[tp], False
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return StringType(), False
    if origin in (list, tuple, set, frozenset) and args:
        return ArrayType(spark_type(args[0], where)[0]), False
    if origin is dict and len(args) == 2:
        return MapType(spark_type(args[0], where)[0], spark_type(args[1], where)[0]), False
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return record_struct(tp), False
    if tp is typing.Any or tp is object:
        return StringType(), True
    raise ConfigurationError(f"{where}: no Spark type for {tp!r}; read with decode=False and parse the value")


def record_struct(record_type: type) -> StructType:
    hints = typing.get_type_hints(record_type)
    fields = []
    for field in dataclasses.fields(record_type):
        data_type, nullable = spark_type(hints.get(field.name, typing.Any), f"{record_type.__name__}.{field.name}")
        fields.append(StructField(field.name, data_type, nullable or field.default is None))
    return StructType(fields)


def decoded_schema(value_type: Any) -> StructType:
    """Metadata columns plus one column per field of ``value_type`` (a Record or dataclass)."""
    if not (isinstance(value_type, type) and dataclasses.is_dataclass(value_type)):
        raise ConfigurationError(f"decode=True needs a topic whose value_type is a Record, not {value_type!r}")
    struct = record_struct(value_type)
    clash = sorted(set(struct.fieldNames()) & set(META_FIELDS))
    if clash:
        raise ConfigurationError(
            f"{value_type.__name__} has fields named like Kafka metadata columns ({', '.join(clash)}); "
            "read with decode=False and select value fields yourself")
    meta = [f for f in RAW_SCHEMA.fields if f.name != "value"]
    return StructType(meta + list(struct.fields))


def to_plain(value: Any) -> Any:
    """A decoded field value as Arrow takes it (Records become dicts, enums their values)."""
    if value is None or isinstance(value, (str, int, float, bool, bytes, dt.date)):
        return value
    if isinstance(value, enum.Enum):
        return value.value if isinstance(value.value, str) else str(value.value)
    if dataclasses.is_dataclass(value):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {to_plain(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in value]
    return str(value)


def _timestamps(messages: list[Any]) -> pa.Array:
    """Kafka's millisecond timestamps as an Arrow timestamp column (integers in, no datetimes)."""
    micros = [None if kind == 0 or ms < 0 else ms * 1000 for kind, ms in (m.timestamp() for m in messages)]
    return pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def _header_column(messages: list[Any], type_: pa.DataType) -> pa.Array:
    headers = [m.headers() for m in messages]
    if not any(headers):
        return pa.nulls(len(messages), type_)
    return pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers], type_)


def _meta_columns(messages: list[Any], schema: pa.Schema, *, value: bool) -> list[pa.Array]:
    """Arrow columns straight from librdkafka messages (no per-row dicts), in schema order."""
    columns = [
        pa.array([m.topic() for m in messages], pa.string()),
        pa.array([m.partition() for m in messages], pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        _timestamps(messages),
        pa.array([m.key() for m in messages], pa.binary()),
    ]
    if value:
        columns.append(pa.array([m.value() for m in messages], pa.binary()))
    columns.append(_header_column(messages, schema.field("headers").type))
    return columns


def raw_batch(messages: list[Any], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(_meta_columns(messages, schema, value=True), schema=schema)


def decoded_batch(messages: list[Any], decode: Callable[[bytes | None], Any], field_names: list[str],
                  schema: pa.Schema, on_error: str) -> pa.RecordBatch:
    """Metadata columns plus the decoded value's fields; a value that does not decode fails the
    read with its coordinates, or is left out under ``onDecodeError=skip``."""
    kept, values = [], []
    for m in messages:
        try:
            values.append(decode(m.value()))
        except Exception as exc:
            if on_error == "skip":
                continue
            raise ConfigurationError(
                f"{m.topic()}[{m.partition()}]@{m.offset()} does not decode: {exc} "
                "(option onDecodeError=skip leaves such records out)") from None
        kept.append(m)
    columns = _meta_columns(kept, schema, value=False)
    for name in field_names:
        columns.append(pa.array([to_plain(getattr(v, name, None)) for v in values], schema.field(name).type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


@functools.cache
def sink_arrow_schema() -> pa.Schema:
    return arrow_schema(SINK_SCHEMA)


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
