"""Checkpoint marks: at-least-once table state that is never ahead of the committed offsets.

Under at-least-once a checkpoint flushes a table's changelog records, then commits the input
offsets. A crash between the two leaves changelog records of records that will be processed
again: replayed into the table they would count those records twice (Kafka Streams has this
flaw). So each at-least-once checkpoint ends a table partition's changelog records with a *mark*
naming the input offsets they go with, and a worker opens its first block of a partition with an
*opening mark*. Whoever restores a partition holds each block back until its mark and applies it
only if the group's committed offsets reached the mark's; a block past them, or one no mark ends
(an opening mark drops what a previous owner left unmarked), is dropped, and its keys are
written again with the restored values at the next checkpoint, so a later reader that passes
the dropped block reads the repair after it. Standby replicas apply
marked blocks as they come and keep the last mark's offsets in the store: a standby that turns
out to be ahead of the committed offsets when promoted is restored from scratch instead.

Exactly-once needs none of this (aborted transactions are invisible to read_committed) and
writes no marks; readers of an exactly-once app ignore marks an earlier at-least-once run left.
"""
from __future__ import annotations

from typing import Any, Callable

import orjson

from ..transport.base import Headers, Message
from ..transport.columns import Columns

MARK_KEY = b"\xff\x00streamkit.mark\x00\xff"  # one key per partition: compaction keeps the newest
MARK_HEADER = "streamkit-mark"
MARK_HEADERS: Headers = [(MARK_HEADER, b"1")]
OPENING_MARK = b"open"  # a worker's first block of a partition follows: anything pending is dropped

Accept = Callable[[dict[str, int]], bool]  # whether a mark's input offsets were committed


def mark_value(offsets: dict[str, int]) -> bytes:
    """A mark's value: ``{source topic: next offset}`` of the mark's own partition number."""
    return orjson.dumps(offsets)


def is_mark(message: Message) -> bool:
    return message.key == MARK_KEY and any(name == MARK_HEADER for name, _ in message.headers or ())


def mark_offsets(raw: bytes | None) -> dict[str, int]:
    return orjson.loads(raw) if raw else {}


def committed_covers(committed: dict[str, int | None]) -> Accept:
    """An ``Accept`` for a restore: each of the mark's offsets is at or below the committed one
    (None: the group never committed that input, so 0). An input the mark names that is not in
    ``committed`` is not read by this app any more: nothing would process its records again, so
    it does not hold the block back."""
    def accept(offsets: dict[str, int]) -> bool:
        return all(offset <= (committed[topic] or 0) for topic, offset in offsets.items() if topic in committed)
    return accept


def cut(items: list, start: int, end: int) -> list:
    """``items[start:end]``, without a copy when that is all of it."""
    return items if start == 0 and end == len(items) else items[start:end]


def put_all(target: dict[bytes, bytes | None], keys: list[bytes | None], values: list[bytes | None]) -> None:
    """``target[key or b""] = value`` for each pair in order, at dict speed."""
    loose: dict[Any, bytes | None] = target  # None keys go in for a moment: taken out below
    loose.update(zip(keys, values, strict=True))
    if None in loose:  # a record without a key (not a table's): stored under b"", as one by one
        del loose[None]
        for key, value in zip(keys, values, strict=True):
            target[key or b""] = value


class MarkedBlocks:
    """One changelog partition's records, released a checkpoint block at a time.

    Before the first mark (a changelog written before marks, or by exactly-once) records pass
    straight through. After it, records wait for the next mark: ``accept`` says whether its
    block is applied or dropped (``dropped`` collects the keys to repair).
    """

    def __init__(self, accept: Accept, *, marked: bool, after: int | None = None) -> None:
        self.accept = accept
        self.marked = marked
        self.pending: dict[bytes, bytes | None] = {}
        self.dropped: set[bytes] = set()
        self.last = after  # offset of the record before the next one fed (the store's offset)

    def feed(self, message: Message, batch: dict[bytes, bytes | None]) -> bytes | None:
        """Route one record into ``batch`` (now) or the pending block; returns a mark's value
        when the record is a mark whose block was applied."""
        return self.feed_fields(message.offset, message.key, message.value, is_mark(message), batch)

    def feed_fields(self, offset: int, key: bytes | None, value: bytes | None, mark: bool,
                    batch: dict[bytes, bytes | None]) -> bytes | None:
        """``feed`` with the record's fields read already (a restore reads each once)."""
        if self.pending and self.last is not None and offset != self.last + 1:
            # An offset gap: compaction removed records, marks among them, so where the blocks
            # ended is unknown. Applied as they are (at worst a repeat, as before marks), never
            # dropped: that could drop committed state that compaction merged into this block.
            batch.update(self.pending)
            self.pending = {}
        self.last = offset
        if not mark:
            if self.marked:
                self.pending[key or b""] = value
            else:
                batch[key or b""] = value
            return None
        self.marked = True
        value = value or b""
        if value != OPENING_MARK and self.accept(mark_offsets(value)):
            batch.update(self.pending)
            self.pending = {}
            return value
        self.drop()
        return None

    def feed_run(self, columns: Columns, start: int, end: int, batch: dict[bytes, bytes | None]) -> None:
        """``feed_fields`` for the records ``start:end`` of ``columns``, none of them a mark:
        one dict update where no offset gap can end a pending block, else record by record."""
        if end <= start:
            return
        offsets = columns.offsets
        if self.marked and not columns.contiguous(start, end):
            feed = self.feed_fields
            for i in range(start, end):
                feed(offsets[i], columns.keys[i], columns.values[i], False, batch)
            return
        if self.pending and self.last is not None and offsets[start] != self.last + 1:
            batch.update(self.pending)  # the gap rule of feed_fields, at the run's start
            self.pending = {}
        self.last = offsets[end - 1]
        put_all(self.pending if self.marked else batch, cut(columns.keys, start, end), cut(columns.values, start, end))

    def drop(self) -> None:
        """The pending block will never be applied: its keys need repairing."""
        self.dropped.update(self.pending)
        self.pending = {}
