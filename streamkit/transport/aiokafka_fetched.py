"""aiokafka's fetched records as streamkit sees them: a ``Message`` view of each record.

Copying a ``ConsumerRecord``'s fields into a ``Message`` (and its headers tuple into a list)
was 6.7% of a stateless aiokafka worker's samples; a view of one object per record, built by a
C-level ``map``, reads a field only when asked, and the router reads only the keys and values
of most records (``keys_and_values``, two C-level maps).
"""
from __future__ import annotations

from itertools import repeat
from operator import attrgetter
from typing import Any, Protocol, Sequence, cast

import msgspec

from .base import Message


class ConsumerRecord(Protocol):
    """The fields of aiokafka's ``ConsumerRecord`` read here (aiokafka ships no type hints)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]
    timestamp: int | None


_key_of = attrgetter("_record.key")
_value_of = attrgetter("_record.value")


class FetchedRecord(msgspec.Struct, eq=False):
    """An aiokafka ``ConsumerRecord`` seen as a streamkit ``Message`` (base.py); the partition
    is kept as a field: a table checks it at every write (``Table._partition``). A
    ``msgspec.Struct`` for its C constructor, as ``confluent_fetched.FetchedMessage``."""

    _record: ConsumerRecord
    partition: int

    @property
    def topic(self) -> str:
        return self._record.topic

    @property
    def offset(self) -> int:
        return self._record.offset

    @property
    def key(self) -> bytes | None:
        return self._record.key

    @property
    def value(self) -> bytes | None:
        return self._record.value

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return list(self._record.headers)

    @property
    def timestamp_ms(self) -> int | None:
        return self._record.timestamp

    @property
    def timestamp(self) -> float | None:
        """In seconds, as Faust's ``message.timestamp``."""
        stamp = self._record.timestamp
        return None if stamp is None else stamp / 1000

    def __repr__(self) -> str:
        return f"<Message {self.topic}[{self.partition}]@{self.offset} key={self.key!r}>"

    @staticmethod
    def keys_and_values(messages: Sequence["FetchedRecord"]) -> tuple[list[bytes | None], list[bytes | None]]:
        """The batch's keys and values in two C-level maps (base.keys_and_values)."""
        return list(map(_key_of, messages)), list(map(_value_of, messages))


def as_message(record: Any) -> Message:
    """One record as a message (a bulk reader's ``Columns.message``); a ``FetchedRecord``
    offers every field of a ``Message`` (duck-typed, hence the cast)."""
    return cast(Message, FetchedRecord(record, record.partition))


def as_messages(records: list[Any], partition: int) -> list[Message]:
    """One partition's fetched records as messages (``FetchedRecord`` views, as ``as_message``)."""
    return cast("list[Message]", list(map(FetchedRecord, records, repeat(partition))))
