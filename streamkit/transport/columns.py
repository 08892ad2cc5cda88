"""One partition's fetched records as parallel lists of offsets, keys and values.

A bulk reader (a table restoring from its changelog) needs three fields of every record and
nothing else. Building one ``Message`` per record and reading its fields back one at a time cost
more than the fetch itself (on confluent every field read is a call into C); lists built in
comprehensions, read by ``dict(zip(keys, values))`` and friends, cost a fraction of it. The
records themselves stay at hand (``message(i)``) for the rare record that needs more: a mark's
headers, a bad value handed to the error policy.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .message import Message


class Columns:
    """``offsets``, ``keys`` and ``values`` of one partition's records, in offset order."""

    __slots__ = ("offsets", "keys", "values", "_records", "_wrap")

    def __init__(self, offsets: list[int], keys: list[bytes | None], values: list[bytes | None],
                 records: Sequence[Any], wrap: Callable[[Any], Message] | None = None) -> None:
        self.offsets = offsets
        self.keys = keys
        self.values = values
        self._records = records
        self._wrap = wrap

    @classmethod
    def of(cls, messages: Sequence[Message]) -> "Columns":
        """From messages a driver fetched already."""
        return cls([m.offset for m in messages], [m.key for m in messages], [m.value for m in messages], messages)

    def __len__(self) -> int:
        return len(self.offsets)

    def message(self, index: int) -> Message:
        """The whole record at ``index`` (headers, timestamp), as every driver's ``Message``."""
        record = self._records[index]
        return record if self._wrap is None else self._wrap(record)

    def contiguous(self, start: int, end: int) -> bool:
        """True if the records ``start:end`` (``start < end``) have consecutive offsets (none
        compacted away between)."""
        return self.offsets[end - 1] - self.offsets[start] == end - 1 - start
