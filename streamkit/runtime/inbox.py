"""The hand-off from the router to the streams (``Subscriber``'s inbox of ``Batch``es), and which
delivered records are processed, per subscriber and partition, in batch granularity.

A batch is handed to exactly one consumer at a time and acknowledged as a prefix count, so an
ack is one integer store. Commit offsets are derived at checkpoint time (never per record): the
first unacknowledged offset of the oldest unfinished batch, i.e. contiguous progress only.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable, Sequence

from ..transport.base import TP
from .event import Event


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


class Inbox(asyncio.Queue[Batch]):
    """A subscriber's queue of batches with a bound (``stream_buffer_batches``) kept two ways.

    The router never waits for room: it ``offer``s a batch. While every stream the worker
    feeds is at its bound, the consume loop waits (a fetch timeout at most) for one to have room
    before it fetches again (``wait_for_room``): a pause makes librdkafka drop what it prefetched
    for the partition, and its records came 0.2-1.1 s after the resume. An inbox that reaches
    twice its bound (its stream took nothing while the loop waited, or other streams kept the
    loop fetching) pauses the batch's partition at the consumer until the stream has taken
    enough (``on_room``). Awaiting the room unboundedly instead held the whole consume loop
    behind one slow agent: no topic was fetched, the worker's other agents starved, and a
    rebalance was answered only once it drained (Kafka Streams and Faust pause the partition
    too). Other senders (channels, tests) ``put`` and wait for room as on a bounded queue.
    (docs/decisions/0014-backpressure-waits-before-it-pauses.md)"""

    def __init__(self, bound: int) -> None:
        super().__init__()  # unbounded underneath: the router's batch always goes in
        self.bound = max(1, bound)
        self.on_room: Callable[[], None] | None = None  # called when a get leaves room again
        self._room = asyncio.Event()
        self._room.set()

    def at_bound(self) -> bool:
        """Holds ``bound`` batches or more (``full()`` stays asyncio's: never, unbounded)."""
        return self.qsize() >= self.bound

    def overfull(self) -> bool:
        """Holds twice its bound: the router pauses the batch's partition."""
        return self.qsize() >= 2 * self.bound

    def put_nowait(self, item: Batch) -> None:  # asyncio.Queue.put() ends here too
        super().put_nowait(item)
        if self.at_bound():
            self._room.clear()

    async def room(self) -> None:
        """Until the inbox is under its bound."""
        await self._room.wait()

    def get_nowait(self) -> Batch:  # asyncio.Queue.get() ends here too
        batch = super().get_nowait()
        left = self.qsize()
        if left < self.bound:
            self._room.set()
            # Held-back partitions are read again at half the bound, not at the first free slot:
            # a pause and resume per batch taken would make the client drop and fetch again what
            # it had prefetched for them, batch after batch.
            if left <= self.bound // 2 and self.on_room is not None:
                self.on_room()
        return batch

    async def put(self, item: Batch) -> None:
        while self.at_bound():
            self._room.clear()
            await self._room.wait()
        self.put_nowait(item)


class Subscriber:
    """A bounded inbox of batches plus what is still unprocessed in it (router → stream)."""

    def __init__(self, name: str, max_batches: int, barrier: Barrier | None = None) -> None:
        self.name = name
        self.barrier = barrier
        self.inbox = Inbox(max_batches)
        self.held_back: set[TP] = set()  # partitions paused because this inbox was full (router.py)
        self.pending: dict[TP, deque[Batch]] = {}
        self.cursors: list[Any] = []  # the Streams reading this inbox (one per agent instance)
        self.raw = False  # its batches' events left undecoded (a columnar agent decodes them into Arrow)

    async def put(self, batch: Batch) -> None:
        """Queue ``batch``, waiting while the inbox is full."""
        self._track(batch)
        await self.inbox.put(batch)

    def offer(self, batch: Batch) -> bool:
        """Queue ``batch`` without waiting; True when the inbox is overfull now (the router
        pauses the partition until it has room)."""
        self._track(batch)
        self.inbox.put_nowait(batch)
        return self.inbox.overfull()

    def _track(self, batch: Batch) -> None:
        queue = self.pending.get(batch.tp)
        if queue is None:
            queue = self.pending[batch.tp] = deque()
        # Finished batches go now, not at the next checkpoint: kept, a commit interval's records
        # stayed alive (memory, longer full collections) and were freed in one loop step.
        while queue and queue[0].acked >= len(queue[0].events):
            queue.popleft()
        queue.append(batch)

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


async def wait_for_room(inboxes: Sequence[Inbox], timeout: float) -> None:
    """Until one of ``inboxes`` is under its bound, ``timeout`` seconds at most."""
    waits = [asyncio.ensure_future(inbox.room()) for inbox in inboxes]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
