"""Typed topics: a name, partitioning, and the codecs that turn keys and values into bytes."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from .codecs import Codec, codec_for
from .event_time import epoch_ms
from .runtime.context import ProcessingContext
from .scheduled_sends import SENT
from .transport.base import Headers, TopicSpec, delivery_position

if TYPE_CHECKING:
    from .types.app import AppProtocol


@dataclass
class PendingMessage:
    """What sensors' ``on_send_initiated`` get (Faust's PendingMessage): the record about to be
    sent; a sensor may add ``headers`` (trace context), which go out with it."""

    topic: str
    key: Any
    value: Any
    headers: list[tuple[str, bytes]]


class Topic:
    """A Kafka topic with typed keys and values. Create through ``app.topic(...)``."""

    def __init__(
        self,
        app: "AppProtocol",
        name: str,
        *,
        key_type: Any = None,
        value_type: Any = None,
        partitions: int | None = None,
        replicas: int | None = None,
        config: dict[str, str] | None = None,
        key_serializer: str | Codec | None = None,
        value_serializer: str | Codec | None = None,
        internal: bool = False,
    ) -> None:
        self.app = app
        self.context: ProcessingContext = app.processing  # the worker's producer while one runs
        self.name = name
        self.key_type = key_type
        self.value_type = value_type
        self.partitions = partitions
        self.replicas = replicas
        self.config = dict(config or {})
        self.key_codec = codec_for(key_type, key_serializer, key=True)
        self.value_codec = codec_for(value_type, value_serializer)
        self.internal = internal

    def __repr__(self) -> str:
        return f"<Topic {self.name!r} key={self.key_codec.name} value={self.value_codec.name}>"

    def join(self, other: "Topic", *, within: Any = None, before: Any = None, after: Any = None, grace: Any = 0,
             how: str = "inner", name: str | None = None, close_idle_after: Any = None) -> Any:
        """A windowed stream-stream join of this topic (left) with ``other`` (right), as an
        agent's input: its stream gives ``(left, right)`` for records with the same key at most
        ``within`` apart (streamkit/joins/windowed.py). ``how``: inner, left or outer;
        ``close_idle_after``: an idle partition's unpaired records go out after that long."""
        # joins/ sits above topics (it builds on streams and tables): the app, which wires the
        # layers together, builds the join
        return self.app.join_topics(self, other, within=within, before=before, after=after, grace=grace, how=how,
                                    name=name, close_idle_after=close_idle_after)

    @property
    def members(self) -> tuple["Topic", ...]:
        """The Kafka topics this object stands for: itself (a TopicGroup: several)."""
        return (self,)

    def spec(self, default_partitions: int, default_replicas: int) -> TopicSpec:
        return TopicSpec(
            self.name, self.partitions or default_partitions, self.replicas or default_replicas, self.config
        )

    async def declare(self) -> None:
        """Faust's ``topic.declare()``: create the topic now if missing (checked if present);
        the worker does this for every declared topic when it starts."""
        from .runtime.topic_admin import ensure_topics

        conf = self.app.conf
        described = await ensure_topics(self.app.driver, conf.bootstrap_servers,
                                        [self.spec(conf.topic_partitions, conf.topic_replicas)],
                                        {self.name: self.partitions}, conf.broker_connect_timeout)
        self.app.topic_creation.exist(described)

    async def maybe_declare(self) -> None:
        """Faust's ``maybe_declare()``: ``declare()`` (creating a topic that exists is a no-op)."""
        await self.declare()

    def get_topic_name(self) -> str:
        """Faust's name for ``topic.name``."""
        return self.name

    @property
    def topics(self) -> tuple[str, ...]:
        """Faust's list of names a topic object stands for: one here."""
        return (self.name,)

    async def send(
        self,
        key: Any = None,
        value: Any = None,
        *,
        headers: Headers | dict[str, bytes] | None = None,
        timestamp: float | None = None,
        partition: int | None = None,
    ) -> asyncio.Future:
        """Encode and queue one record; await the returned future for ``(partition, offset)``.

        ``timestamp`` is in seconds (like ``time.time()``). Sends made while an agent processes a
        record are flushed before that record's offset is committed.
        """
        if isinstance(headers, dict):
            headers = list(headers.items())
        ts = epoch_ms(timestamp) if timestamp is not None else None
        key_bytes, value_bytes = self.key_codec.encode(key), self.value_codec.encode(value)
        sensors = self.app.sensors
        if not sensors.active:
            sent = await self.app.send_raw(self.name, key_bytes, value_bytes, headers=headers, timestamp=ts,
                                           partition=partition)
            assert sent is not None  # a tracked send (the default) has its future
            return sent
        return await self._send_sensed(key, value, key_bytes, value_bytes, headers, ts, partition)

    async def _send_sensed(self, key: Any, value: Any, key_bytes: bytes | None, value_bytes: bytes | None,
                           headers: Any, ts: int | None, partition: int | None) -> asyncio.Future:
        """A send the app's sensors hear of: ``on_send_initiated``, then ``_completed`` or ``_error``."""
        sensors, producer = self.app.sensors, self.context.producer
        message = PendingMessage(self.name, key, value, list(headers or []))
        states = sensors.call("on_send_initiated", producer, self.name, message, len(key_bytes or b""),
                              len(value_bytes or b""))
        fut = await self.app.send_raw(self.name, key_bytes, value_bytes, headers=message.headers or None, timestamp=ts,
                                      partition=partition)
        assert fut is not None  # a tracked send (the default) has its future

        def done(f: asyncio.Future) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            if exc is None:
                sensors.call_each("on_send_completed", states, producer, metadata=f.result())
            else:
                sensors.call_each("on_send_error", states, producer, exc)

        fut.add_done_callback(done)
        return fut

    def try_send_soon(self, key: Any = None, value: Any = None) -> bool:
        """``send_soon`` without a coroutine when the producer has room (False: use ``send_soon``)."""
        app, producer = self.app, self.context.producer
        if producer is None or app.sensors.active:
            return False
        if self.name not in app.topic_creation.known:
            return False  # not created yet: send_soon creates it first
        return producer.try_send(self.name, self.key_codec.encode(key), self.value_codec.encode(value))

    def bound_try_send_soon(self) -> Callable[[Any, Any], bool] | None:
        """``try_send_soon`` with the running worker's producer and this topic's codecs looked
        up once (an agent's batch loop calls it per record); None before the worker starts, or
        while the topic is not created yet (its first send creates it: ``send_soon``)."""
        producer = self.context.producer
        if producer is None or self.name not in self.app.topic_creation.known:
            return None
        sensors, try_send, name = self.app.sensors, producer.try_send, self.name
        encode_key, encode_value = self.key_codec.encode, self.value_codec.encode

        def send(key: Any, value: Any) -> bool:
            return not sensors.active and try_send(name, encode_key(key), encode_value(value))

        return send

    def send_soon(self, key: Any = None, value: Any = None, *, headers: Headers | None = None,
                  partition: int | None = None, timestamp: float | None = None) -> Awaitable[None]:
        """Queue a record without a delivery future (the hot path of sinks and repartitioning);
        a failed delivery still makes the next checkpoint's flush fail, so nothing is lost.
        ``timestamp`` in seconds, as ``send``'s.

        A plain call, as in Faust (``on_window_close`` callbacks are synchronous code): the record
        is queued, or scheduled when the producer cannot take it yet (scheduled_sends.py: the
        checkpoint waits for it). ``await`` the result to wait until it is queued."""
        key_bytes, value_bytes = self.key_codec.encode(key), self.value_codec.encode(value)
        ts = epoch_ms(timestamp) if timestamp is not None else None
        app = self.app
        if not app.sensors.active and not app.scheduled_sends.pending:  # (those first: the records' order)
            producer = self.context.producer
            if (producer is not None and self.name in app.topic_creation.known
                    and producer.try_send(self.name, key_bytes, value_bytes, partition, headers, ts)):
                return SENT
        return app.scheduled_sends.schedule(self.name, self._send_later(key, value, key_bytes, value_bytes, headers,
                                                                        ts, partition))

    async def _send_later(self, key: Any, value: Any, key_bytes: bytes | None, value_bytes: bytes | None,
                          headers: Headers | None, ts: int | None, partition: int | None) -> None:
        """``send_soon``'s send once the producer has room (or the topic is created)."""
        if self.app.sensors.active:  # sensors hear of it as of any send (a delivery future)
            await self._send_sensed(key, value, key_bytes, value_bytes, headers, ts, partition)
            return
        await self.app.send_raw(self.name, key_bytes, value_bytes, headers=headers, timestamp=ts, partition=partition,
                                track=False)

    async def send_and_wait(self, key: Any = None, value: Any = None, **kwargs: Any) -> tuple[int, int]:
        """Send and wait until the broker acknowledged it; returns ``(partition, offset)``."""
        return delivery_position(await (await self.send(key, value, **kwargs)))


class TopicGroup(Topic):
    """Faust's ``app.topic("a", "b")``: one agent input over several topics (same types).

    An agent reads every member through one stream; sending needs one topic, so ``send`` on a
    group is refused (as Faust refuses ``get_topic_name()`` on it)."""

    def __init__(self, app: "AppProtocol", members: list[Topic]) -> None:
        first = members[0]
        super().__init__(app, ",".join(m.name for m in members), key_type=first.key_type,
                         value_type=first.value_type, partitions=first.partitions)
        self.key_codec, self.value_codec = first.key_codec, first.value_codec
        self._members = tuple(members)

    def __repr__(self) -> str:
        return f"<TopicGroup {[m.name for m in self._members]}>"

    @property
    def members(self) -> tuple[Topic, ...]:
        return self._members

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(m.name for m in self._members)

    def _refuse(self) -> TypeError:
        return TypeError(f"{self!r} stands for several topics: send to one of them (app.topic({self._members[0].name!r}))")

    def get_topic_name(self) -> str:
        raise self._refuse()

    async def send(self, *args: Any, **kwargs: Any) -> asyncio.Future:
        raise self._refuse()

    def send_soon(self, *args: Any, **kwargs: Any) -> Awaitable[None]:
        raise self._refuse()

    def try_send_soon(self, *args: Any, **kwargs: Any) -> bool:
        raise self._refuse()

    def bound_try_send_soon(self) -> Callable[[Any, Any], bool] | None:
        raise self._refuse()

    async def declare(self) -> None:
        for member in self._members:
            await member.declare()
