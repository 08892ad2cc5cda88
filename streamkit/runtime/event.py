"""The record in hand: ``Event`` (one decoded record and where it came from) and ``processing``,
the context variable holding the record the current task is processing (``current_event()``).
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import msgspec

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
