"""Spark ``Row`` objects in and out of a StatefulProcessor, without Row's per-field costs.

``row["offset"]`` searches the Row's field list on every read and ``Row(topic=..., ...)`` builds
its field list for every row: in a stateful agent's task these cost more than the agent's own
code (benchmarks/spark_stateful_tasks.py). Rows are read once into named tuples (fields read by
attribute, at C speed) and written as Rows of a class whose field names are set once.
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Iterable

from pyspark.sql import Row

from ..event_time import epoch_ms
from ..transport.message import Headers, Message


@functools.lru_cache(maxsize=32)
def _tuple_type(fields: tuple[str, ...]) -> Any:
    return namedtuple("SparkRow", fields)  # noqa: PYI024 - the fields are only known at run time


def named_rows(rows_in: Iterable[Any]) -> list[Any]:
    """The rows as named tuples with the same fields (``r.offset``), in their order."""
    out: list[Any] = []
    make = None
    for row in rows_in:
        if make is None:
            make = _tuple_type(tuple(row.__fields__))._make
        out.append(make(row))  # a Row is a tuple: its values in field order
    return out


def headers_of(row: Any) -> Headers:
    """A record row's headers as the (name, bytes) pairs a Message holds."""
    return [(h["key"], h["value"]) for h in row.headers] if row.headers else []


def millis(stamp: Any) -> int | None:
    """A row's Spark timestamp (a datetime) as the broker's milliseconds."""
    return None if stamp is None else epoch_ms(stamp)


def message_of(row: Any, *, partition: int | None = None, key: bytes | None = None) -> Message:
    """A record row (named: ``named_rows``) as the Message a worker would have fetched;
    ``partition``/``key``: where the agent's stage two reads it after a re-key."""
    return Message(row.topic, row.partition if partition is None else partition, row.offset,
                   row.key if key is None else key, row.value, headers_of(row), millis(row.timestamp))


def pass_dead_letter(out: Any, row: Any) -> None:
    """A dead letter stage one already wrote as a row: on to the sink as it is."""
    out.add(row.topic, row.key, row.value, headers_of(row))


class SinkRow(Row):
    """A Row of the sink's columns (rows.SINK_SCHEMA), built from its values in that order."""

    __fields__ = ["topic", "partition", "key", "value", "headers"]

    def __new__(cls, *values: Any) -> "SinkRow":
        return tuple.__new__(cls, values)
