"""``group_by`` and ``through`` inside ``agent.test_context()``: re-keyed in this process.

A worker forwards a re-keyed record through a repartition topic and reads it back from there;
a test context has no broker, so its streams' owner hands each record, under its new key, to
the stream the agent goes on reading, in the partition that key hashes to (Kafka's default
partitioner), with the record's offset, time and headers. The table writes the agent makes
after ``group_by`` are then checked against that partition, as a worker checks them. ``put``
waits for the re-keyed records too (``pending``): the agent is done with a record once it is
done with what the record became.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from ..codecs import codec_for
from ..runtime.event import Event, processing
from ..runtime.inbox import Batch, Subscriber
from ..streams.stream import Chainable, Stream
from ..transport.base import TP, Message
from ..transport.partitioner import partition_for_key
from .rekeying import group_key, stream_of

if TYPE_CHECKING:
    from .running import RunningAgent

KeyOf = Callable[[Event, Any], Any]


class InProcessOwner:
    """The owner of a test context's streams (module docstring); ``Stream`` registers with it."""

    def __init__(self, agent: "RunningAgent", partitions: int, on_failure: Callable[[BaseException], None]) -> None:
        self.agent = agent
        self.app = agent.app
        self.name = agent.name
        self.partitions = partitions
        self.streams: list[Stream] = []
        self.pending: list[Batch] = []  # re-keyed records not yet finished by the agent
        self.rekeyed = False  # a group_by: records put without a key get one
        self._tasks: list[asyncio.Task] = []
        self._derived: dict[tuple[str, int], Stream] = {}
        self._on_failure = on_failure

    def repartition(self, source: Chainable, key: Any, *, name: str | None, partitions: int | None,
                    key_type: Any, value_type: Any) -> Stream:
        field, key_fn = group_key(key, name)
        self.rekeyed = True
        return self._forwarding(source, f"{self.name}-{name or field}-repartition", lambda event, value: key_fn(value),
                                codec_for(key_type, key=True), partitions or self.partitions)

    def through(self, source: Chainable, topic: Any) -> Stream:
        name = topic if isinstance(topic, str) else topic.name
        key_codec = getattr(topic, "key_codec", None) or codec_for(None, key=True)
        return self._forwarding(source, name, lambda event, value: event.key, key_codec,
                                getattr(topic, "partitions", None) or self.partitions)

    def finished(self) -> bool:
        """Every re-keyed record so far is done (the agent asked for the one after it)."""
        self.pending = [batch for batch in self.pending if batch.acked < len(batch.events)]
        return not self.pending

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _forwarding(self, source: Chainable, name: str, key_of: KeyOf, key_codec: Any, partitions: int) -> Stream:
        base = stream_of(source)
        existing = self._derived.get((name, id(base)))
        if existing is not None:  # the same pipeline asked for again
            return existing
        subscriber = Subscriber(f"{self.name}:{name}", 1 << 16)
        stream = self._derived[(name, id(base))] = Stream(subscriber, topic=base.topic, owner=self)

        async def hand_over(event: Event, value: Any) -> None:
            key = key_of(event, value)
            key_bytes = key_codec.encode(key)
            partition = event.partition if key_bytes is None else partition_for_key(key_bytes, partitions)
            old = event.message
            value_bytes = old.value if value is event.value else None  # after map(): not the record's bytes
            message = Message(name, partition, old.offset, key_bytes, value_bytes, old.headers, old.timestamp_ms)
            batch = Batch(TP(name, partition), [Event(key, value, message)])
            self.pending.append(batch)
            await subscriber.put(batch)

        async def forward() -> None:
            try:
                if source is base:
                    async for event in base.events():
                        await hand_over(event, event.value)
                    return
                async for value in source:
                    event = processing.get()
                    assert event is not None
                    await hand_over(event, value)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # put() raises it
                self._on_failure(exc)

        self._tasks.append(asyncio.create_task(forward(), name=f"test-context:{name}"))
        return stream
