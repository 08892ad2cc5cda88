"""The operators every stream has (``filter``, ``map``, ``join``, ``combine``...) and the
Derived stream they give: below ``stream.py`` (the agent's Stream) and ``fanout.py`` (tee's
branches), which are both Chainables, so neither imports the other's module back.

combine: values of all its inputs as they come. Each input is asked for its next value only
after the previous one it gave was handled, so each record is acked in its own stream when it
is done, as without combine.
"""
from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterable

from ..runtime.event import Event, processing

if TYPE_CHECKING:
    from ..topics import Topic


def current_event() -> Event | None:
    """The record the calling agent is processing (its key, headers, offset...)."""
    return processing.get()


class Chainable:
    """Operators that give a new stream of values, the same on a Stream and on what they return."""

    def __aiter__(self) -> AsyncIterator[Any]:
        raise NotImplementedError

    def _derive(self, iterator: AsyncIterator[Any], rebuild: "Rebuild | None" = None) -> "Derived":
        raise NotImplementedError

    def _fresh(self) -> AsyncIterator[Any]:
        """A new iterator over the same values, its operators run anew (a forwarder's restart:
        an async generator that raised is over)."""
        raise NotImplementedError

    def _agent_stream(self) -> Any:
        """The agent's Stream these values come from (None for ``app.stream(iterable)``); a
        Stream is its own."""
        return getattr(self, "source", None)

    def _is_agent_stream(self) -> bool:
        return self._agent_stream() is self

    def _chain(self, step: Callable[[AsyncIterator[Any]], AsyncIterator[Any]]) -> "Derived":
        """The Derived of ``step`` over this stream, able to build its pipeline again."""
        return self._derive(step(self), lambda: step(self._fresh()))  # type: ignore[arg-type]

    def filter(self, predicate: Callable[[Any], Any]) -> "Derived":
        """Keep values for which ``predicate`` (sync or async) is true; others count as done."""
        is_async = inspect.iscoroutinefunction(predicate)

        async def run(upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
            async for value in upstream:
                if (await predicate(value)) if is_async else predicate(value):
                    yield value

        return self._chain(run)

    def map(self, fn: Callable[[Any], Any] | Callable[[Any], Awaitable[Any]]) -> "Derived":
        """Transform each value with ``fn`` (sync or async)."""
        is_async = inspect.iscoroutinefunction(fn)

        async def run(upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
            async for value in upstream:
                yield (await fn(value)) if is_async else fn(value)

        derived = self._chain(run)
        derived.mapped = True
        return derived

    def enumerate(self, start: int = 0) -> "Derived":
        """``(index, value)`` pairs, as Python's enumerate (Faust's)."""
        async def run(upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
            i = start
            async for value in upstream:
                yield i, value
                i += 1

        derived = self._chain(run)
        derived.mapped = True
        return derived

    def join(self, table: Any, *, on: Any = None, how: str = "inner", as_of: bool = False) -> "Derived":
        """``(value, table value)`` per record: the table's value for the record's key, or for
        ``on`` (a field or function of the value; a partitioned table then repartitions the
        stream by it). ``how="left"`` keeps records the table lacks (None); ``as_of=True`` reads
        the value valid at the record's time from a table declared with ``history=``.
        Windowed stream-stream joins are declared on topics: ``left.join(right, within=...)``."""
        from ..topics import Topic

        if isinstance(table, Topic):
            raise TypeError(f"a stream-stream join is declared on the topics, as the agent's input: "
                            f"@app.agent(left_topic.join({table.name!r} topic, within=timedelta(...))), whose stream "
                            "gives (left, right) pairs")
        app = getattr(table, "app", None)
        if app is None:
            raise TypeError(f"stream.join() takes a Table or GlobalTable (app.Table(...)), not {table!r}; Faust's "
                            "join(*fields) never ran there (NotImplementedError): docs/joins.md shows each join")
        return app.join_stream(self, table, on=on, how=how, as_of=as_of)  # joins/ sits above streams

    def echo(self, *channels: Any) -> "Derived":
        """Forward every value, with its record's key, to each of ``channels`` (topics or agents),
        then give it out (Faust's)."""
        topics = [getattr(channel, "topic", channel) for channel in channels]

        async def run(upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
            async for value in upstream:
                event = current_event()
                key = event.key if event is not None else None
                for topic in topics:
                    await topic.send_soon(key=key, value=value)
                yield value

        return self._chain(run)

    def combine(self, *streams: Any) -> "Derived":
        """Values of this stream and ``streams`` as they come (tee branches, filter/map results,
        ``app.stream(iterable)``); each record is acked in its own stream (``combine`` below)."""
        return combine(self, streams)

    def group_by(self, key: Any, *, name: str | None = None, partitions: int | None = None,
                 key_type: Any = None, value_type: Any = None) -> Any:
        """Re-key through an internal repartition topic; returns the stream of that topic (a
        Stream: ``Any`` here, as this module sits below stream.py).

        ``key`` is a Record field (``Order.user``), a field name, or a function of the value
        (then ``name`` is required). Keys land where Kafka's murmur2 partitioner puts them.
        After ``filter``/``map`` the values they give out are re-keyed and forwarded (Faust's).
        """
        return self._owner("group_by").repartition(self, key, name=name, partitions=partitions,
                                                   key_type=key_type, value_type=value_type)

    def through(self, topic: "Topic | str") -> Any:
        """Forward every record (after ``filter``/``map``: every value they give out) to ``topic``
        and continue from that topic's stream."""
        return self._owner("through").through(self, topic)

    def _owner(self, operator: str) -> Any:
        owner = getattr(self._agent_stream(), "owner", None)
        if owner is None:
            raise RuntimeError(f"{operator} is only available inside an agent")
        return owner


class Derived(Chainable):
    """A stream after ``filter``/``map``/``enumerate``/``echo``: iterable, and chainable further."""

    def __init__(self, source: Any, iterator: AsyncIterator[Any], rebuild: "Rebuild | None" = None) -> None:
        self.source = source  # the agent's Stream, or None (app.stream(iterable))
        self._iterator = iterator
        self._rebuild = rebuild
        self.mapped = False  # after map/enumerate/join: its values may not be of the topic's value type

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterator

    def _derive(self, iterator: AsyncIterator[Any], rebuild: "Rebuild | None" = None) -> "Derived":
        derived = Derived(self.source, iterator, rebuild)
        derived.mapped = self.mapped
        return derived

    def _fresh(self) -> AsyncIterator[Any]:
        if self._rebuild is None:
            raise RuntimeError("this stream cannot be built again: it was derived from an iterable, not an agent's stream")
        return self._rebuild()


Rebuild = Callable[[], AsyncIterator[Any]]


def combine(first: Any, others: Iterable[Any]) -> Any:
    """The Derived stream of ``first`` and ``others``' values, as they come."""
    inputs = [first, *others]
    owner = _owner_of(first)
    for other in inputs[1:]:
        if not hasattr(other, "__aiter__"):
            raise TypeError(f"stream.combine({other!r}): combine takes streams (tee branches, filter/map results, "
                            "app.stream(iterable)); a table is joined with stream.join(table)")
        theirs = _owner_of(other)
        if isinstance(other, Chainable) and other._is_agent_stream() and theirs is not None and theirs is not owner:  # noqa: SLF001
            raise TypeError(f"stream.combine(): {other!r} is the stream of agent {theirs.name}, which iterates it; "
                            "to read several topics in one agent, give it app.topic('a', 'b') (or a pattern)")

    def fresh(s: Any) -> AsyncIterator[Any]:
        return s._fresh() if isinstance(s, Chainable) else s.__aiter__()  # noqa: SLF001 - a fan-out reads its branches' own cursors

    source = _base_of(first)
    return Derived(source, merge([s.__aiter__() for s in inputs]), lambda: merge([fresh(s) for s in inputs]))


def _base_of(stream: Any) -> Any:
    """The agent's Stream ``stream``'s values come from, if any."""
    return stream._agent_stream() if isinstance(stream, Chainable) else getattr(stream, "source", None)  # noqa: SLF001


def _owner_of(stream: Any) -> Any:
    return getattr(_base_of(stream), "owner", None)


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
