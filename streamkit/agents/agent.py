"""Agents: supervised async functions over a stream, with sinks, concurrency and request/reply.

A failing agent is restarted; the record it failed on is retried ``agent_retries`` times and
then handed to the error policy (dead-letter topic by default), so one poison record can
neither kill the worker nor stall its partition. An error no retry can fix (streamkit's
``NoRetry`` ones, ``agent_no_retry``, ``no_retry=``) is handed over at once. A failure holding no record is the agent's own:
restarted with a growing backoff, failed after ``agent_max_restarts`` in a row
(agents/restarts.py).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, NoReturn

from ..errors import AgentFailed, ConfigurationError, exception_types, refuse_faust_options
from ..runtime.event import Event, processing
from ..runtime.inbox import Subscriber
from ..runtime.purge import REPARTITION_TOPIC_CONFIG
from ..streams.stream import Chainable, Stream
from .fold import Fold, per_record
from .functions import batch_body
from .rekeying import group_key
from .rekeying import stream_of as _stream_of
from .replies import HEADER_CORRELATION, HEADER_REPLY_TO
from .restarts import RestartBudget
from .supervision import supervise

if TYPE_CHECKING:
    from ..runtime.context import ProcessingContext
    from ..topics import Topic
    from ..types.app import AppProtocol
    from .columnar import Columnar
    from .testing import AgentTestContext

log = logging.getLogger("streamkit.agent")

AgentFun = Callable[[Stream], Any]


class Agent:
    """An ``@app.agent`` function bound to its input topic."""

    def __init__(self, app: "AppProtocol", fun: AgentFun, topic: "Topic", *, name: str, concurrency: int = 1,
                 sink: Iterable[Any] | None = None, fold: "Fold | None" = None, no_retry: Any = (),
                 columnar: bool = False) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        one_reader = getattr(topic, "one_reader", None)  # why this input is read by one stream only
        if concurrency > 1 and one_reader:
            raise ConfigurationError(f"agent {name!r}: concurrency={concurrency} is refused: {one_reader}")
        self.app = app
        self.source_fun = fun  # as declared (Spark inspects it)
        self.topic = topic
        self.name = name
        self.concurrency = concurrency
        self.sinks = _checked_sinks(name, sink)
        self.fold = fold
        self.no_retry = exception_types(f"agent {name!r}: no_retry", no_retry)  # with agent_no_retry: no_retry_types
        self.columnar: "Columnar | None" = None
        if columnar:  # a function of a pyarrow RecordBatch per batch (agents/columnar.py)
            from .columnar import Columnar

            self.columnar = Columnar(name, fun, topic, self.sinks)
        self.per_record = self.columnar is None and not (inspect.iscoroutinefunction(fun)
                                                         or inspect.isasyncgenfunction(fun))
        if fold is not None:
            fun = fold.body()
        elif self.per_record:
            fun = per_record(fun)  # a plain function of one value: its result is the output
        self.fun = fun  # the per-record body (test contexts, Spark); the worker runs a function's batch body
        self.is_generator = inspect.isasyncgenfunction(fun)
        self.restarts = 0
        self.failure: BaseException | None = None  # set once the agent is failed (agents/restarts.py)
        self.restarting: str | None = None  # while it waits to start again after a crash: why (``/ready``)
        self._context: "ProcessingContext | None" = None  # the worker running it, from start()
        self._tasks: list[asyncio.Task] = []
        self._repartitions: dict[tuple[str, int], Stream] = {}
        self._internal_subscribers: dict[str, Subscriber] = {}
        self._forwarders: list[asyncio.Task] = []
        self._forwarded: list[Stream] = []  # the streams the forwarders read (a restart budget of their own)
        self.streams: list[Stream] = []  # every stream its tasks iterate (Stream registers itself)
        self.__doc__ = self.source_fun.__doc__
        self.default_topic = False  # the app named its topic (agents/naming.py), set by app.agent

    def get_topic_names(self) -> tuple[str, ...]:
        """Faust's: the names of the topics the agent reads."""
        return tuple(member.name for member in self.topic.members)

    def __repr__(self) -> str:
        return f"<Agent {self.name} topic={self.topic.name} concurrency={self.concurrency}>"

    # -- lifecycle ------------------------------------------------------------------------------

    def _subscriber(self, topic: "Topic") -> Subscriber:
        assert self._context is not None
        subscriber = Subscriber(f"{self.name}:{topic.name}", self.app.conf.stream_buffer_batches)
        subscriber.raw = self.columnar is not None and topic is self.topic  # it decodes its batches into Arrow
        for member in topic.members:  # app.topic("a", "b"): one stream over both
            self._context.subscribe(member, subscriber)
        return subscriber

    def start(self, context: "ProcessingContext") -> None:
        """Subscribe to its topic on the worker bound to ``context`` and start its streams."""
        self._context = context
        self.failure = None
        if getattr(self.topic, "is_channel", False):  # app.channel(): fed in process, no offsets
            subscriber = self.topic.subscriber(self.name)  # type: ignore[attr-defined]
        else:
            subscriber = self._subscriber(self.topic)
        make_stream = getattr(self.topic, "make_stream", None)  # a windowed join's input: pairs
        for i in range(self.concurrency):
            stream = make_stream(subscriber, self) if make_stream else Stream(subscriber, topic=self.topic, owner=self)
            self._tasks.append(asyncio.create_task(self._supervise(stream), name=f"agent:{self.name}:{i}"))

    async def stop(self) -> None:
        tasks = self._tasks + self._forwarders
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks, self._forwarders, self._repartitions, self._internal_subscribers = [], [], {}, {}
        self._forwarded = []
        self.streams = []

    def streams_started(self) -> bool:
        """Every stream of this agent asked for its first record (or its task ended): its
        group_by/through topics are all declared, so the topology can be frozen."""
        tasks_done = all(task.done() for task in self._tasks + self._forwarders)
        return tasks_done or (bool(self.streams) and all(s.started for s in self.streams))

    def internal_topics(self) -> list[str]:
        """The repartition and through topics this agent forwards to and reads back."""
        return list(self._internal_subscribers)

    # -- supervision ----------------------------------------------------------------------------

    def no_retry_types(self) -> tuple[type[BaseException], ...]:
        """The exception types whose records go to the error policy without retries (besides
        streamkit's own ``NoRetry`` errors): the app's ``agent_no_retry`` and this agent's ``no_retry``."""
        return (*self.app.conf.agent_no_retry, *self.no_retry)

    async def _supervise(self, stream: Stream, body: Callable[[Stream], Any] | None = None) -> None:
        """Run the agent forever under the shared supervision rules (agents/supervision.py)."""

        if body is None and self.columnar is not None:
            from .columnar_body import columnar_body

            body = columnar_body(self)
        elif body is None and (self.fold is not None or self.per_record) and type(stream) is Stream:
            body = batch_body(self)  # a function cannot await: run it over the batch in hand (not a join's pairs)

        async def run_once(stream: Stream) -> None:
            if body is not None:
                await body(stream)
            elif self.is_generator:
                emit, emit_now, now_processing = self._emit, self._bound_emit_now(), processing.get
                async for output in self.fun(stream):  # the event may come from a through() stream
                    event = now_processing()
                    left = emit_now(output, event)
                    if left >= 0:
                        await emit(output, event, left)
            else:
                await self.fun(stream)

        budget = RestartBudget(self.app.conf.agent_max_restarts,
                               (lambda: [stream]) if body is not None and stream in self._forwarded else
                               (lambda: [s for s in self.streams if s not in self._forwarded]))

        async def again(exc: BaseException | None) -> None:
            """Back off before the next run, or fail the agent (agents/restarts.py)."""
            delay = budget.failed()
            if delay is None:
                await self._failed(exc)  # raises: the task ends
                return
            if exc is None:
                log.warning("agent %s returned; restarting it in %.1fs (agents are meant to run forever)",
                            self.name, delay)
            elif budget.repeats(exc):
                log.error("agent %s crashed outside a record again (%s: %s); restart %d of %d in %.1fs", self.name,
                          type(exc).__name__, exc, budget.in_a_row, budget.limit, delay)
            else:
                log.error("agent %s crashed outside a record; restart %d of %d in %.1fs", self.name,
                          budget.in_a_row, budget.limit, delay, exc_info=exc)
            why = "returned" if exc is None else f"{type(exc).__name__}: {exc}"
            self.restarting = f"{why}; restart {budget.in_a_row} of {budget.limit} in {delay:.1f}s"
            try:
                await asyncio.sleep(delay)
            finally:
                self.restarting = None
            budget.started()

        async def returned() -> None:
            await again(None)

        async def crashed(exc: BaseException) -> None:
            self.restarts += 1
            if self._context is not None and self._context.planning and not self.streams_started():
                # the topology cannot be known: runtime/planning.py says so, in one line
                self.failure = AgentFailed(f"agent {self.name!r} cannot start: {type(exc).__name__}: {exc}")
                raise self.failure from None
            await again(exc)

        retries = self.app.conf.agent_retries

        def failed(first: Event, attempt: int, exc: BaseException) -> None:
            self.restarts += 1
            if attempt == 0:  # not retried: the error policy's line says what and where, once
                return
            if attempt == 1:  # the traceback once per record; a retry fails the same way, mostly
                log.error("agent %s failed on %s[%d]@%d (attempt 1 of %d)", self.name, first.topic,
                          first.partition, first.offset, retries + 1, exc_info=exc)
            else:
                log.error("agent %s failed on %s[%d]@%d (attempt %d of %d): %s: %s", self.name, first.topic,
                          first.partition, first.offset, attempt, retries + 1, type(exc).__name__, exc)

        async def give_up(held: Any, exc: BaseException) -> None:
            assert self._context is not None
            if getattr(exc, "halts_worker", False):  # the worker's state is missing, not the record's fault:
                await self._context.fail(exc)  # halt, the records unacknowledged, rather than dead-letter them
                raise exc
            for event in held:
                processing.set(event)  # exactly-once: its DLQ record joins its source's transaction
                errors = self._context.errors
                assert errors is not None  # the worker that started it runs
                await errors.handle(f"agent {self.name}", event.message, exc)

        budget.started()
        await supervise(stream, run_once, retries=retries, give_up=give_up, returned=returned, crashed=crashed,
                        failed=failed, no_retry=self.no_retry_types())

    async def _failed(self, exc: BaseException | None) -> NoReturn:
        """Out of restarts: the agent is failed (one line); this task ends (AgentFailed leaves
        ``supervise``). The worker goes on for its other agents, not ready (``/ready`` 503
        naming it), and exits 1 when it stops (runtime/runner.py)."""
        limit = self.app.conf.agent_max_restarts
        what = "returned" if exc is None else f"crashed outside a record ({type(exc).__name__}: {exc})"
        self.failure = failure = AgentFailed(
            f"agent {self.name!r} failed: {what} {limit + 1} times in a row without taking a record "
            f"(agent_max_restarts={limit}); fix the agent and start the worker again")
        log.error("%s; the worker is not ready (/ready answers 503) and exits 1 when stopped", failure)
        raise failure from exc

    def _emit_now(self, value: Any, event: Event | None) -> int:
        """The synchronous part of ``_emit``: each sink topic whose producer has room, in order.
        -1 when the output is all sent; else the index of the first sink ``_emit`` must still
        serve (``len(self.sinks)``: only a reply is left)."""
        sinks = self.sinks
        key = event.key if event is not None else None
        for i, sink in enumerate(sinks):
            try_send = getattr(sink, "try_send_soon", None)  # a topic; agents and callables: _emit
            if try_send is None or not try_send(key, value):
                return i
        if event is not None and event.message.headers:
            return len(sinks)
        return -1

    def _one_sink_send(self) -> Callable[[Any, Any], bool] | None:
        """With one sink topic, its ``try_send_soon`` bound once (``Topic.bound_try_send_soon``);
        None for other sinks, several, or before the worker starts."""
        sinks = self.sinks
        bind = getattr(sinks[0], "bound_try_send_soon", None) if len(sinks) == 1 else None
        return bind() if bind is not None else None

    def _bound_emit_now(self) -> Callable[[Any, Event | None], int]:
        """``_emit_now`` for a generator agent's per-record loop: with one sink topic, its send
        bound once (producer, codecs: ``Topic.bound_try_send_soon``), no lookups per record."""
        send = self._one_sink_send()
        if send is None:
            return self._emit_now
        emit_now = self._emit_now

        def emit_now_one_sink(value: Any, event: Event | None) -> int:
            if event is None:
                return emit_now(value, event)
            if not send(event.key, value):
                return 0
            return 1 if event.message.headers else -1  # 1: only the reply is left

        return emit_now_one_sink

    async def _emit(self, value: Any, event: Event | None, start: int = 0) -> None:
        """Send an agent's output to its sinks (from the ``start``-th: ``_emit_now`` served the
        ones before), and to the asker when the input was a request."""
        key = event.key if event is not None else None
        for sink in self.sinks[start:] if start else self.sinks:
            topic = sink.topic if isinstance(sink, Agent) else sink
            if hasattr(topic, "try_send_soon"):
                if not topic.try_send_soon(key, value):  # the synchronous fast path, else wait for room
                    await topic.send_soon(key=key, value=value)
            elif getattr(topic, "is_channel", False):  # a channel, or an agent reading one: in process
                await topic.send(key=key, value=value)
            else:
                result = sink(value)
                if inspect.isawaitable(result):
                    await result
        if event is not None and event.message.headers:
            reply_to = event.header(HEADER_REPLY_TO)
            if reply_to is not None:
                await self.app.replies.reply(reply_to.decode(), event.header(HEADER_CORRELATION), value)

    # -- sending to the agent -------------------------------------------------------------------

    async def send(self, key: Any = None, value: Any = None, *, headers: Any = None, partition: int | None = None,
                   timestamp: float | None = None, callback: Callable[[Any], Any] | None = None,
                   **faust_only: Any) -> asyncio.Future:
        """Queue a record for this agent's topic; await the future for delivery (Faust's
        ``callback(future)`` runs once it is delivered or failed)."""
        refuse_faust_options("agent.send", faust_only, _FAUST_SEND_OPTIONS)
        fut = await self.topic.send(key=key, value=value, headers=headers, partition=partition, timestamp=timestamp)
        if fut is None:  # a channel: handed over in process already
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(None)
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    async def cast(self, value: Any = None, *, key: Any = None, headers: Any = None, partition: int | None = None,
                   timestamp: float | None = None, **faust_only: Any) -> None:
        """Fire and forget (delivery is still checked at the next checkpoint's flush)."""
        refuse_faust_options("agent.cast", faust_only, _FAUST_SEND_OPTIONS)
        if timestamp is not None:
            await self.topic.send(key=key, value=value, headers=headers, partition=partition, timestamp=timestamp)
            return
        await self.topic.send_soon(key=key, value=value, headers=headers, partition=partition)

    async def ask(self, value: Any = None, *, key: Any = None, timeout: float = 30.0, reply_type: Any = None) -> Any:
        """Send a request and wait for the value the agent yields while processing it."""
        if getattr(self.topic, "is_channel", False):
            raise NotImplementedError(f"agent {self.name} reads a channel: ask() needs a topic (the request names "
                                      "the reply topic); declare the agent on app.topic(...)")
        return await self.app.replies.ask(self.topic, key, value, timeout=timeout, reply_type=reply_type)

    async def join(self, values: Iterable[Any], key: Any = None, *, timeout: float = 30.0) -> list[Any]:
        """Ask the agent about every value concurrently; the replies in the values' order (Faust's)."""
        return list(await asyncio.gather(*(self.ask(value, key=key, timeout=timeout) for value in values)))

    async def kvjoin(self, items: Iterable[tuple[Any, Any]], *, timeout: float = 30.0) -> list[Any]:
        """``join`` over ``(key, value)`` pairs: each request keyed (so partitioned) by its key."""
        return list(await asyncio.gather(*(self.ask(value, key=key, timeout=timeout) for key, value in items)))

    async def map(self, values: Iterable[Any], key: Any = None, *, timeout: float = 30.0) -> AsyncIterator[Any]:
        """Ask about every value concurrently; yield the replies as they arrive (Faust's)."""
        for reply in asyncio.as_completed([self.ask(value, key=key, timeout=timeout) for value in values]):
            yield await reply

    async def kvmap(self, items: Iterable[tuple[Any, Any]], *, timeout: float = 30.0) -> AsyncIterator[Any]:
        """``map`` over ``(key, value)`` pairs."""
        for reply in asyncio.as_completed([self.ask(value, key=key, timeout=timeout) for key, value in items]):
            yield await reply

    def test_context(self) -> "AgentTestContext":
        """Faust's ``async with agent.test_context() as ctx: event = await ctx.put(value)``: the
        agent's function over records put in directly, no broker (agents/testing.py)."""
        if self.columnar is not None:
            raise ConfigurationError(f"agent {self.name!r} is columnar: call its function on a pyarrow RecordBatch "
                                     "directly (agent.columnar.fun(batch)), or run the app (app.running())")
        from .testing import AgentTestContext

        return AgentTestContext(self)

    # -- group_by / through ---------------------------------------------------------------------

    def repartition(self, source: Chainable, key: Any, *, name: str | None, partitions: int | None,
                    key_type: Any, value_type: Any) -> Stream:
        field, key_fn = group_key(key, name)
        base = _stream_of(source)
        topic_name = f"{self.app.id}-{self.name}-{name or field}-repartition"
        # after map/enumerate/join the values are the function's, not the topic's: value_type= says
        source_type = None if getattr(source, "mapped", False) else _topic_of(base).value_type
        if key_type is None and field and isinstance(source_type, type):
            key_type = getattr(source_type, "__annotations__", {}).get(field)
            key_type = key_type if isinstance(key_type, type) else None
        return self._forwarding_stream(
            source, topic_name, lambda event, value: key_fn(value), partitions=partitions or self._partitions(base),
            key_type=key_type, value_type=value_type or source_type,
            config=dict(REPARTITION_TOPIC_CONFIG),  # kept until processed, whatever their timestamps (runtime/purge.py)
        )

    def through(self, source: Chainable, topic: "Topic | str") -> Stream:
        if isinstance(topic, str):
            base = _stream_of(source)
            base_topic = _topic_of(base)
            value_type = None if getattr(source, "mapped", False) else base_topic.value_type
            declared: Topic = self.app.topic(topic, key_type=base_topic.key_type, value_type=value_type)
            topic = declared
        return self._forwarding_stream(source, topic.name, lambda event, value: event.key, topic=topic)

    def _partitions(self, source: Stream) -> int:
        """A repartition topic has as many partitions as its source (as the broker has it)."""
        if self._context is not None and self._context.running:
            return self._context.partition_count(_topic_of(source).members[0].name)
        return _topic_of(source).partitions or self.app.conf.topic_partitions

    def _forwarding_stream(self, source: Chainable, topic_name: str, key_of: Callable[[Event, Any], Any], *,
                           topic: "Topic | None" = None, **topic_kwargs: Any) -> Stream:
        """A stream over ``topic_name``, fed by a supervised task forwarding ``source`` there
        (after filter/map: the values they give out, each keyed by ``key_of(its record, value)``).

        Cached per (name, source cursor): a restarted agent body re-attaches instead of
        forwarding twice; with concurrency each instance forwards its own share.
        """
        base = _stream_of(source)
        cache_key = (topic_name, id(base))
        existing = self._repartitions.get(cache_key)
        if existing is not None:
            return existing
        if topic is None:
            topic = self.app.topics.get(topic_name) or self.app.topic(topic_name, internal=True, **topic_kwargs)
        target = topic

        async def send(event: Event, value: Any) -> None:
            # the record keeps its time (as in Kafka Streams): windows and as-of joins downstream read it
            ts = event.message.timestamp_ms
            await target.send_soon(key=key_of(event, value), value=value, headers=event.message.headers or None,
                                   timestamp=None if ts is None else ts / 1000)

        async def forward(stream: Stream) -> None:
            if source is stream:
                async for event in stream.events():
                    await send(event, event.value)
                return
            # the operators run anew each time (one that raised is over); what they drop is
            # acknowledged as the stream moves on, so commits advance past it
            async for value in source._fresh():  # noqa: SLF001 - an agent reads its source stream's own cursor
                event = processing.get()
                assert event is not None
                await send(event, value)

        self._forwarded.append(base)
        self._forwarders.append(asyncio.create_task(self._supervise(base, body=forward), name=f"forward:{topic_name}"))
        subscriber = self._internal_subscribers.get(topic_name)
        if subscriber is None:
            subscriber = self._internal_subscribers[topic_name] = self._subscriber(topic)
        stream: Stream[Any] = Stream(subscriber, topic=topic, owner=self)
        self._repartitions[cache_key] = stream
        return stream


def _checked_sinks(name: str, sink: Iterable[Any] | None) -> list[Any]:
    """Faust's sinks: topics, channels, agents and callables (``fn(value)``, maybe async)."""
    if sink is None:
        return []
    if isinstance(sink, str) or callable(sink) or (hasattr(sink, "send") and not inspect.isgenerator(sink)):
        raise ConfigurationError(f"agent {name!r}: sink= takes a list of sinks (sink=[{sink!r}]), not one sink")
    sinks = list(sink)
    for one in sinks:
        if not (hasattr(one, "send") or callable(one)) or isinstance(one, str):
            raise ConfigurationError(f"agent {name!r}: sink {one!r} is not a topic, channel, agent or callable; "
                                     "name a topic with app.topic(name)")
    return sinks


def _topic_of(stream: Stream) -> "Topic":
    """The topic an agent's stream reads (group_by and through start from one)."""
    topic = stream.topic
    assert topic is not None, "an agent's stream reads a topic"
    return topic


_FAUST_SEND_OPTIONS = {
    "key_serializer": "the codecs are the topic's: declare key_type/key_serializer on app.topic(...)",
    "value_serializer": "the codecs are the topic's: declare value_type/value_serializer on app.topic(...)",
    "reply_to": "use agent.ask(), which names the app's reply topic",
    "correlation_id": "use agent.ask(), which correlates the reply",
    "force": "every send goes out at once (buffered by the client, flushed at each checkpoint)",
}
