"""``agent.test_context()``, as in Faust: unit-test an agent's function without a broker.

    async with count.test_context() as agent:
        event = await agent.put("hello", key="k")
        assert agent.results[event.message.offset] == 1

Each ``put`` encodes the record with the topic's codecs (so a value that would not survive the
topic does not pass here either), hands it to the agent's function and returns once the agent
finished with it (asked for the next record); what the agent yielded for it is in
``results[offset]``, and for an agent that does not yield, the value put (as in Faust). An
exception the agent raised for the record is raised by ``put``.

What the agent yields also goes to its sinks, as in Faust: ``sink.send(value=...)`` (with
``key=`` when the record has one) for topics, channels and agents, ``fn(value)`` for callables;
a test mocks the topics' ``send`` to keep them off the broker, as Faust's testing guide shows.

Tables work as in Faust's tests: while no worker serves them, the context gives every table
every partition in memory (empty at entry, dropped at exit), and a record lands in the
partition its key hashes to, so the table checks a worker makes (co-partitioning) hold here
too. ``group_by`` and ``through`` re-key in this process (agents/in_process.py): the table
writes after a ``group_by`` are checked against the new key's partition. A record put without
a key (Faust's tests often do) has no partition: unless the agent re-keys it, its table writes
are not checked, and (where the app has tables) the context warns once that a worker would need
the record keyed.
"""
from __future__ import annotations

import asyncio
import inspect
import time
import warnings
from typing import TYPE_CHECKING, Any

from ..event_time import epoch_ms
from ..runtime.event import Event
from ..runtime.inbox import Batch, Subscriber
from ..streams.stream import Stream, current_event
from ..transport.base import TP, Message
from ..transport.partitioner import partition_for_key
from .in_process import InProcessOwner

if TYPE_CHECKING:
    from .running import RunningAgent


class AgentTestContext:
    def __init__(self, agent: "RunningAgent") -> None:
        self.agent = agent
        self.results: dict[int, Any] = {}
        self._offset = 0
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._subscriber = Subscriber(f"{agent.name}:test-context", 1)
        self._owner = InProcessOwner(agent, self._partitions(), self._failed)
        self._stream: Stream[Any] = Stream(self._subscriber, topic=agent.topic, owner=self._owner)
        self._served: list[Any] = []  # tables this context serves in memory
        self._warned_keyless = False

    async def __aenter__(self) -> "AgentTestContext":
        self._serve_tables()
        self._task = asyncio.create_task(self._run(), name=f"test-context:{self.agent.name}")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._owner.stop()
        for table in self._served:
            table.local = {}
        self._served.clear()

    def _serve_tables(self) -> None:
        for table in self.agent.app.tables.values():
            if table.serve_in_memory():
                self._served.append(table)

    def _partitions(self) -> int:
        topic = self.agent.topic
        return getattr(topic, "partitions", None) or self.agent.app.conf.topic_partitions

    def _failed(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc

    async def _run(self) -> None:
        try:
            if self.agent.is_generator:
                async for output in self.agent.fun(self._stream):
                    event = current_event()
                    if event is not None:
                        self.results[event.offset] = output
                    await self._to_sinks(None if event is None else event.key, output)
            else:
                await self.agent.fun(self._stream)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # put() raises it
            self._failed(exc)

    async def _to_sinks(self, key: Any, value: Any) -> None:
        """Faust's sinks for a test: ``send`` (mockable) for topics, channels and agents."""
        for sink in self.agent.sinks:
            send = getattr(sink, "send", None)
            if send is not None:
                await (send(value=value) if key is None else send(key=key, value=value))
            else:
                result = sink(value)
                if inspect.isawaitable(result):
                    await result

    async def put(self, value: Any = None, key: Any = None, *, headers: Any = None, partition: int | None = None,
                  timestamp: float | None = None, timeout: float = 10.0) -> Event:
        """Hand one record to the agent; returns its Event once the agent is done with it. The
        record's partition is its key's (Kafka's default partitioner) unless given."""
        if self._failure is not None:
            raise self._failure
        topic = self.agent.topic
        key_bytes, value_bytes = topic.key_codec.encode(key), topic.value_codec.encode(value)
        keyless = partition is None and key_bytes is None
        if partition is None:
            partition = -1 if key_bytes is None else partition_for_key(key_bytes, self._partitions())
        stamp = epoch_ms(time.time() if timestamp is None else timestamp)
        message = Message(topic.name, partition, self._offset, key_bytes, value_bytes, list(headers or []), stamp)
        self._offset += 1
        event = Event(topic.key_codec.decode(key_bytes), topic.value_codec.decode(value_bytes), message)
        batch = Batch(TP(topic.name, partition), [event])
        await self._subscriber.put(batch)
        deadline = asyncio.get_running_loop().time() + timeout
        while batch.acked < 1 or not self._owner.finished():
            if self._failure is not None:
                raise self._failure
            assert self._task is not None
            if self._task.done():
                raise RuntimeError(f"agent {self.agent.name} returned before finishing the record")
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"agent {self.agent.name} did not finish the record within {timeout}s")
            await asyncio.sleep(0.001)
        if not self.agent.is_generator:  # nothing yielded: what went in (Faust's results)
            self.results[message.offset] = event.value
        if keyless and self._served and not self._owner.rekeyed and not self._warned_keyless:
            self._warned_keyless = True
            warnings.warn(f"{self.agent.name}.test_context(): a record put without a key has no partition, so "
                          "every table write here goes to its key's partition; a worker keeps a key of another "
                          "partition than the record's in the record's partition (key_partitioning='strict' "
                          "refuses it): key the records (put(value, key=...)) or re-key the stream "
                          "(stream.group_by)", stacklevel=2)
        return event
