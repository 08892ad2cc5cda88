"""Which delivered records are processed, per subscriber and partition, in batch granularity.

A batch is handed to exactly one consumer at a time and acknowledged as a prefix count, so an
ack is one integer store. Commit offsets are derived at checkpoint time (never per record): the
first unacknowledged offset of the oldest unfinished batch, i.e. contiguous progress only.
"""
from __future__ import annotations

import asyncio
from collections import deque
from contextvars import ContextVar
from typing import Any, Sequence

import msgspec

from ..transport.base import TP

# The record being processed in this task: an Event (agents), or a raw Message while a record
# that failed to decode is handed to the error policy. Exactly-once routes sends by it.
processing: ContextVar[Any] = ContextVar("streamkit_current_event", default=None)


_SAME: Any = object()  # event.send/forward: keep the record's own key, value or headers


def _app_of(channel: Any) -> Any:
    app = getattr(channel, "app", None)
    if app is None or isinstance(channel, str):
        raise TypeError(f"event.forward() takes a topic object (app.topic(...)), not {channel!r}")
    return app


class Event(msgspec.Struct, eq=False):
    """One decoded record with where it came from; ``message`` keeps the original bytes.

    Built once per record on the hot path, so where-from fields are read through from the
    message instead of copied; a ``msgspec.Struct`` for its C constructor (0.10 against 0.16-0.24
    µs a record for a slotted class's ``__init__``). ``eq=False``: events compare and hash by
    identity, as records in hand are found by it."""

    key: Any
    value: Any
    message: Any
    stream: Any = None  # set by noack() streams only (Faust's event.ack())

    @property
    def headers(self) -> dict[str, bytes]:
        """The record's headers as a dict, as Faust's ``event.headers`` (a repeated name keeps
        its last value; ``event.message.headers`` is the list of pairs)."""
        return dict(self.message.headers or ())

    @property
    def topic(self) -> str:
        topic: str = self.message.topic  # any driver's message (duck-typed: message is Any)
        return topic

    @property
    def partition(self) -> int:
        partition: int = self.message.partition
        return partition

    @property
    def offset(self) -> int:
        offset: int = self.message.offset
        return offset

    @property
    def timestamp(self) -> int | None:
        """The broker's timestamp in ms (``event.message.timestamp`` is seconds, as in Faust)."""
        stamp: int | None = self.message.timestamp_ms
        return stamp

    async def forward(self, channel: Any, key: Any = _SAME, value: Any = _SAME, *, partition: int | None = None,
                      headers: Any = _SAME) -> Any:
        """Faust's ``event.forward(topic)``: this record's own bytes (key, value, headers) to
        ``channel`` (a Topic), unless new ones are given; the future of the delivery."""
        message = self.message
        key_bytes = message.key if key is _SAME else channel.key_codec.encode(key)
        value_bytes = message.value if value is _SAME else channel.value_codec.encode(value)
        return await _app_of(channel).send_raw(channel.name, key_bytes, value_bytes, partition=partition,
                                               headers=message.headers if headers is _SAME else headers)

    async def send(self, channel: Any, key: Any = _SAME, value: Any = _SAME, *, partition: int | None = None,
                   headers: Any = _SAME) -> Any:
        """Faust's ``event.send(topic)``: this record's key and value (or the given ones) encoded
        by ``channel``'s codecs, with its headers unless others are given."""
        return await channel.send(key=self.key if key is _SAME else key, value=self.value if value is _SAME else value,
                                  partition=partition, headers=self.message.headers if headers is _SAME else headers)

    def ack(self) -> bool:
        """Faust's ``event.ack()`` on a ``stream.noack()`` stream: this record is processed."""
        stream = getattr(self, "stream", None)
        if stream is None:
            raise RuntimeError("event.ack() is for events of a stream.noack() stream; others are acked when the "
                               "agent asks for the next record")
        acked: bool = stream.ack(self)
        return acked

    def header(self, name: str) -> bytes | None:
        """The first value of header ``name`` (None when absent)."""
        headers: list[tuple[str, bytes]] = self.message.headers or []
        for key, value in headers:
            if key == name:
                return value
        return None

    def __repr__(self) -> str:
        return f"<Event {self.topic}[{self.partition}]@{self.offset} key={self.key!r}>"


class Batch:
    """Events of one partition delivered together; ``acked`` counts the processed prefix."""

    __slots__ = ("tp", "events", "acked", "revoked")

    def __init__(self, tp: TP, events: list[Event]) -> None:
        self.tp = tp
        self.events = events
        self.acked = 0
        self.revoked = False


class Barrier:
    """Stops streams between records while an exactly-once checkpoint commits.

    A cursor that holds no record waits here before taking the next one, so once every cursor
    holds nothing, the tables and outputs reflect exactly the records below the commit offsets.
    """

    __slots__ = ("closed", "_open")

    def __init__(self) -> None:
        self.closed = False
        self._open = asyncio.Event()
        self._open.set()

    def close(self) -> None:
        self.closed = True
        self._open.clear()

    def open(self) -> None:
        self.closed = False
        self._open.set()

    async def wait(self) -> None:
        await self._open.wait()


class Subscriber:
    """A bounded inbox of batches plus what is still unprocessed in it (router → stream)."""

    def __init__(self, name: str, max_batches: int, barrier: Barrier | None = None) -> None:
        self.name = name
        self.barrier = barrier
        self.inbox: asyncio.Queue[Batch] = asyncio.Queue(max_batches)
        self.pending: dict[TP, deque[Batch]] = {}
        self.cursors: list[Any] = []  # the Streams reading this inbox (one per agent instance)
        self.raw = False  # its batches' events left undecoded (a columnar agent decodes them into Arrow)

    async def put(self, batch: Batch) -> None:
        queue = self.pending.get(batch.tp)
        if queue is None:
            queue = self.pending[batch.tp] = deque()
        # Finished batches go now, not at the next checkpoint: kept, a commit interval's records
        # stayed alive (memory, longer full collections) and were freed in one loop step.
        while queue and queue[0].acked >= len(queue[0].events):
            queue.popleft()
        queue.append(batch)
        await self.inbox.put(batch)

    def first_unprocessed(self, tp: TP) -> int | None:
        """Offset of the oldest record not yet processed on ``tp``; None when all are done."""
        queue = self.pending.get(tp)
        while queue:
            batch = queue[0]
            if batch.acked < len(batch.events):
                return batch.events[batch.acked].offset
            queue.popleft()
        return None

    def revoke(self, tps: Sequence[TP]) -> None:
        """Stop handing out these partitions' queued records (the new owner reprocesses them)."""
        for tp in tps:
            for batch in self.pending.get(tp, ()):
                batch.revoked = True

    def forget(self, tps: Sequence[TP]) -> None:
        for tp in tps:
            self.pending.pop(tp, None)

    def busy_with(self, tps: set[TP]) -> bool:
        """True while a cursor still holds an unfinished record of one of ``tps``."""
        return any(cursor.holds_any(tps) for cursor in self.cursors)

    def holding(self) -> list[Any]:
        """Events some cursor is in the middle of processing (exactly-once waits for none)."""
        return [event for cursor in self.cursors for event in cursor.held_events()]
