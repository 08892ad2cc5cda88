"""One record as a driver fetched it: ``Message``, what every driver hands the worker.

Its own module so that ``columns.py`` (which base.py's consumer builds) and base.py both
import it without importing each other.
"""
from __future__ import annotations

Headers = list[tuple[str, bytes]]


class Message:
    """One record as fetched from the broker (raw bytes, nothing decoded)."""

    __slots__ = ("topic", "partition", "offset", "key", "value", "headers", "timestamp_ms")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: int | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers or []
        self.timestamp_ms = timestamp  # the broker's, in ms

    @property
    def timestamp(self) -> float | None:
        """In seconds, as Faust's ``message.timestamp`` (``timestamp_ms`` is the broker's ms)."""
        stamp = self.timestamp_ms
        return None if stamp is None else stamp / 1000

    def __repr__(self) -> str:
        return f"<Message {self.topic}[{self.partition}]@{self.offset} key={self.key!r}>"
