"""librdkafka's fetched messages as streamkit sees them: per-partition runs, ``Message`` views
and ``Columns``.

Measured per record (10,000 records in 20 runs over 4 partitions): the split 84 ns, with a
``FetchedMessage`` each 189 ns, as columns 157 ns. (cProfile shows the split at ~500 ns a record:
its cost per C call, not the code's. A split by ``groupby`` over (topic, partition) pairs and
slices was no faster, 97 ns.)
"""
from __future__ import annotations

import logging
from operator import itemgetter
from typing import Any, Callable, Protocol, cast

import msgspec
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as RawMessage

from .base import TP, Message
from .columns import Columns

log = logging.getLogger("streamkit.confluent")

# librdkafka's own methods, mapped over a run in C. A fetched message that is no error event
# always has its offset (the stubs say Optional for every field of any message).
_offset_of = cast(Callable[[Any], int], RawMessage.offset)
_key_of = RawMessage.key
_value_of = RawMessage.value
_timestamp_of = RawMessage.timestamp  # (type, ms)
_stamp_of = itemgetter(1)


class FetchedRaw(Protocol):
    """A librdkafka message as ``split`` hands it on: no error event, so topic and offset are
    set (the library's stubs make every field Optional, for messages of any kind)."""

    def topic(self) -> str: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes]] | None: ...
    def timestamp(self) -> tuple[int, int | None]: ...


class FetchedMessage(msgspec.Struct, eq=False, gc=False):
    """A librdkafka message seen as a streamkit ``Message``; fields are read on access.

    Copying all seven fields into a ``Message`` cost ~1.4 µs per record, most of the fetch
    path; the router reads only the key and value of most records. The partition is kept: the
    split reads it anyway, and a table checks it at every write (``Table._partition``). A
    ``msgspec.Struct`` for its C constructor: 0.11 against 0.27 µs a record for a slotted class's
    ``__init__`` (``eq=False``: compared by identity, as before). ``gc=False``: the cyclic
    collector does not track it (its fields, a librdkafka message and an int, hold nothing that
    refers back): 0.08 against 0.03 µs a record to make and free, and a fetched batch's thousands
    of them no longer fill the young generation (runtime/gc_tuning.py)."""

    _raw: FetchedRaw
    partition: int

    @classmethod
    def of(cls, raw: Any) -> "FetchedMessage":
        """A view of one librdkafka message whose partition is not known yet."""
        return cls(raw, raw.partition())

    @property
    def topic(self) -> str:
        return self._raw.topic()

    @property
    def offset(self) -> int:
        return self._raw.offset()

    @property
    def key(self) -> bytes | None:
        return self._raw.key()

    @property
    def value(self) -> bytes | None:
        return self._raw.value()

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return self._raw.headers() or []

    @property
    def timestamp_ms(self) -> int | None:
        return self._raw.timestamp()[1]

    @property
    def timestamp(self) -> float | None:
        """In seconds, as Faust's ``message.timestamp``."""
        stamp = self._raw.timestamp()[1]
        return None if stamp is None else stamp / 1000

    def __repr__(self) -> str:
        return f"<Message {self.topic}[{self.partition}]@{self.offset} key={self.key!r}>"

    @staticmethod
    def keys_and_values(messages: list["FetchedMessage"]) -> tuple[list[bytes | None], list[bytes | None]]:
        """The batch's keys and values read by mapping librdkafka's own methods (base.py)."""
        raws: list[Any] = [message._raw for message in messages]  # noqa: SLF001 - this class's own field (a staticmethod)
        return list(map(_key_of, raws)), list(map(_value_of, raws))

    @staticmethod
    def stamps_and_offsets(messages: list["FetchedMessage"]) -> tuple[list[int | None], list[int]]:
        """The batch's timestamps (ms) and offsets, by librdkafka's own methods mapped in C."""
        raws: list[Any] = [message._raw for message in messages]  # noqa: SLF001 - this class's own field (a staticmethod)
        return list(map(_stamp_of, map(_timestamp_of, raws))), list(map(_offset_of, raws))


def split(raw: list[Any], refuse: Callable[[KafkaError], bool],
          wrap: Callable[[Any, int], Any] | None = None) -> dict[TP, list[Any]]:
    """The fetched records per partition in fetch order (``wrap(record, partition)`` applied
    to each); error events
    that ``refuse`` names are raised, end-of-partition events dropped, the rest logged
    (librdkafka retries them itself)."""
    out: dict[TP, list[Any]] = {}
    topic, partition = None, -1  # messages come in runs per partition: the first one starts a run
    append: Callable[[Any], None] = [].append  # so this is replaced before any use
    for m in raw:
        err = m.error()
        if err is not None:
            if refuse(err):
                raise KafkaException(err)
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer: %s", err)
            continue
        if m.partition() != partition or m.topic() != topic:
            topic, partition = m.topic(), m.partition()
            append = out.setdefault(TP(topic, partition), []).append
        append(m if wrap is None else wrap(m, partition))
    return out


def as_columns(runs: dict[TP, list[Any]]) -> dict[TP, Columns]:
    """Each field read once per record; no wrapper per record (``message(i)`` makes one)."""
    return {tp: Columns(list(map(_offset_of, run)), list(map(_key_of, run)), list(map(_value_of, run)),
                        run, _message_of)
            for tp, run in runs.items()}


def _message_of(raw: Any) -> Message:
    """One record as a ``Message`` (``Columns.message``): a ``FetchedMessage`` offers every
    field of one (duck-typed, hence the cast)."""
    return cast(Message, FetchedMessage.of(raw))
