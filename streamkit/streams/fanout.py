"""``stream.tee(n)`` and ``stream.combine(*streams)``: one agent's records through several
branches, and several streams as one.

tee: the branches share the source stream's records; each gets every record, in order. The
source holds a record (as ``noack()`` does) until every branch asked for the one after it, so
a checkpoint never commits past a record some branch has not finished. A branch more than
``MAX_LAG`` records ahead of the slowest waits for it (memory stays bounded): every branch must
be iterated, concurrently (``combine`` them, or iterate one in a task of the agent).

combine: values of all its inputs as they come. Each input is asked for its next value only
after the previous one it gave was handled, so each record is acked in its own stream when it
is done, as without combine.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, AsyncIterator, Iterable

from ..runtime.progress import Event, processing
from .stream import Chainable, Derived, Stream  # stream.py imports this module when it is used

MAX_LAG = 1000  # records a branch may run ahead of the slowest one


class Tee:
    """The shared state of ``n`` branches over one source stream."""

    def __init__(self, source: Stream, n: int) -> None:
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


def branches(source: Stream, n: int) -> tuple[TeeBranch, ...]:
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




def combine(first: Any, others: Iterable[Any]) -> Any:
    """The Derived stream of ``first`` and ``others``' values, as they come."""
    inputs = [first, *others]
    owner = _owner_of(first)
    for other in inputs[1:]:
        if not hasattr(other, "__aiter__"):
            raise TypeError(f"stream.combine({other!r}): combine takes streams (tee branches, filter/map results, "
                            "app.stream(iterable)); a table is joined with stream.join(table)")
        theirs = _owner_of(other)
        if isinstance(other, Stream) and theirs is not None and theirs is not owner:
            raise TypeError(f"stream.combine(): {other!r} is the stream of agent {theirs.name}, which iterates it; "
                            "to read several topics in one agent, give it app.topic('a', 'b') (or a pattern)")

    def fresh(s: Any) -> AsyncIterator[Any]:
        return s._fresh() if isinstance(s, Chainable) else s.__aiter__()  # noqa: SLF001 - a fan-out reads its branches' own cursors

    source = first if isinstance(first, Stream) else getattr(first, "source", None)
    return Derived(source, merge([s.__aiter__() for s in inputs]), lambda: merge([fresh(s) for s in inputs]))


def _owner_of(stream: Any) -> Any:
    base = stream if isinstance(stream, Stream) else getattr(stream, "source", None)
    return getattr(base, "owner", None)


async def _next(iterator: AsyncIterator[Any]) -> tuple[Any, Event | None]:
    """The next value and the record it came from (set where the input ran: another task)."""
    value = await iterator.__anext__()
    return value, processing.get()


async def merge(iterators: list[AsyncIterator[Any]]) -> AsyncIterator[Any]:
    """Values of all ``iterators`` as they come; each is asked again once its value was handled."""
    pending: dict[asyncio.Future, AsyncIterator[Any]] = {asyncio.ensure_future(_next(it)): it for it in iterators}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: iterators.index(pending[f])):  # stable among simultaneous ones
                iterator = pending.pop(future)
                try:
                    value, event = future.result()
                except StopAsyncIteration:
                    continue
                processing.set(event)
                yield value
                pending[asyncio.ensure_future(_next(iterator))] = iterator
    finally:
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.wait(pending)
