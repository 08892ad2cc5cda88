"""``stream.tee(n)``: one agent's records through several branches (``combine``, several
streams as one, is in chain.py with the other operators).

tee: the branches share the source stream's records; each gets every record, in order. The
source holds a record (as ``noack()`` does) until every branch asked for the one after it, so
a checkpoint never commits past a record some branch has not finished. A branch more than
``MAX_LAG`` records ahead of the slowest waits for it (memory stays bounded): every branch must
be iterated, concurrently (``combine`` them, or iterate one in a task of the agent).

The source is the agent's Stream (stream.py, which imports this module for ``tee()``): here it
is the TeeSource protocol, the four things a tee uses of it.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, AsyncIterator, Protocol

from ..runtime.event import Event, processing
from .chain import Chainable, Derived

MAX_LAG = 1000  # records a branch may run ahead of the slowest one


class TeeSource(Protocol):
    """What a tee uses of its source, the agent's Stream."""

    _hold: bool

    async def _past_barrier(self) -> None: ...

    async def next_event(self) -> Event | None: ...

    def ack(self, event: Event) -> bool: ...


class Tee:
    """The shared state of ``n`` branches over one source stream."""

    def __init__(self, source: TeeSource, n: int) -> None:
        self.source = source
        source._hold = True  # records are acked here, once every branch is past them  # noqa: SLF001 - a fan-out acks its source's records itself
        self.events: deque[Event] = deque()
        self.base = 0  # the absolute index of events[0]
        self.handed = [0] * n  # per branch: records handed out
        self.done = [0] * n  # per branch: records taken past (it asked for the next one)
        self.pulling = asyncio.Lock()
        self.moved = asyncio.Event()

    async def take(self, branch: int) -> Event:
        """The branch's next record; the one it had before counts as done for it."""
        self.done[branch] = self.handed[branch]
        self._release()
        while True:
            pos = self.handed[branch]
            if pos < self.base + len(self.events):
                event = self.events[pos - self.base]
                self.handed[branch] = pos + 1
                processing.set(event)
                return event
            if pos - min(self.done) >= MAX_LAG:
                moved = self.moved
                await moved.wait()  # the slowest branch must catch up first
                continue
            async with self.pulling:
                if pos < self.base + len(self.events):
                    continue  # another branch pulled it meanwhile
                # A committing exactly-once checkpoint: no new record until it is over, though
                # the source holds the other branches' (they finish theirs, then wait here too).
                await self.source._past_barrier()  # noqa: SLF001 - a fan-out acks its source's records itself
                pulled = await self.source.next_event()
                assert pulled is not None
                self.events.append(pulled)

    def _release(self) -> None:
        slowest = min(self.done)
        released = False
        while self.events and slowest > self.base:
            self.source.ack(self.events.popleft())
            self.base += 1
            released = True
        if released:
            self.moved.set()
            self.moved = asyncio.Event()


def branches(source: TeeSource, n: int) -> tuple[TeeBranch, ...]:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"stream.tee({n!r}): the number of branches must be an int of at least 1")
    tee = Tee(source, n)
    return tuple(TeeBranch(tee, i) for i in range(n))


class TeeBranch(Chainable):
    """One of ``stream.tee(n)``'s streams: every record of the source, in order."""

    def __init__(self, tee: Tee, index: int) -> None:
        self.tee = tee
        self.index = index
        self.source = tee.source  # the agent's stream (group_by/through naming)
        self.mapped = False

    def __repr__(self) -> str:
        return f"<tee branch {self.index} of {self.tee.source!r}>"

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._values()

    async def _values(self) -> AsyncIterator[Any]:
        while True:
            yield (await self.tee.take(self.index)).value

    async def events(self) -> AsyncIterator[Event]:
        """Events with key, value, headers, topic, partition, offset and timestamp."""
        while True:
            yield await self.tee.take(self.index)

    async def items(self) -> AsyncIterator[tuple[Any, Any]]:
        """``(key, value)`` pairs."""
        while True:
            event = await self.tee.take(self.index)
            yield event.key, event.value

    def _derive(self, iterator: AsyncIterator[Any], rebuild: Any = None) -> Derived:
        return Derived(self.tee.source, iterator, rebuild)

    def _fresh(self) -> AsyncIterator[Any]:
        return self._values()
