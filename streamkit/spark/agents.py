"""Agents inside Spark tasks: the worker's own agent code, fed one micro-batch partition at a time.

A stateless agent runs through ``mapInArrow``: its async generator iterates a real ``Stream``
over the task's records, and the stream ends (``EndOfInput``) when they are used up. A keyed
fold runs through ``transformWithState``: Spark groups a micro-batch by key, the step function
runs over each key's records in (partition, offset) order, and the state lives in Spark's state
store. What Spark cannot reproduce exactly is refused before the query starts (checks.py).
Decoding, supervision (retries, then the error policy) and the policy itself are the worker's
own code (runtime/decoding.decode_batch, agents/supervision.py, runtime/dead_letters.ErrorPolicy).
"""
from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..agents.supervision import supervise
from ..runtime.dead_letters import ErrorPolicy
from ..runtime.decoding import decode_batch
from ..runtime.event import Event, processing
from ..runtime.inbox import Batch, Subscriber
from ..streams.stream import Stream
from ..transport.base import TP, Message
from . import rows
from .apps import load_app
from .task_errors import task_failed

BEFORE_ANY_RECORD = "its start (before any record)"

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..joins.windowed import WindowJoin


def window_join_of(agent: "Agent") -> "WindowJoin | None":
    """The windowed stream-stream join the agent reads (``left.join(right, within=...)``), if any:
    its buffer and stream time are partition state, as a windowed table's (spark/partitioned.py)."""
    from ..joins.windowed import WindowJoin

    return agent.topic if isinstance(agent.topic, WindowJoin) else None


class EndOfInput(BaseException):
    """The task's records are used up (BaseException: an agent's ``except Exception`` lets it pass)."""


class _FiniteInbox:
    """A Subscriber inbox holding one batch; asking for more ends the agent's iteration."""

    def __init__(self, batch: Batch) -> None:
        self._batch: Batch | None = batch

    def get_nowait(self) -> Batch:
        if self._batch is None:
            raise asyncio.QueueEmpty
        batch, self._batch = self._batch, None
        return batch

    async def get(self) -> Batch:
        if self._batch is None:
            raise EndOfInput
        return self.get_nowait()


class SinkRows:
    """Output rows in the sink's columns, filled per record, handed to Spark as one Arrow batch."""

    def __init__(self) -> None:
        self.topic: list[str] = []
        self.partition: list[int | None] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.headers: list[Any] = []
        self.schema = rows.sink_arrow_schema()

    def add(self, topic: str, key: bytes | None, value: bytes | None, headers: Any = None,
            partition: int | None = None) -> None:
        self.topic.append(topic)
        self.partition.append(partition)
        self.key.append(key)
        self.value.append(value)
        self.headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)

    def rows(self) -> Iterator[Any]:
        """The rows as a StatefulProcessor yields them (``pyspark.sql.Row``, the sink's columns)."""
        from .row_access import SinkRow

        return map(SinkRow, self.topic, self.partition, self.key, self.value, self.headers)

    def batch(self) -> pa.RecordBatch:
        cols = [self.topic, self.partition, self.key, self.value, self.headers]
        return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, self.schema, strict=True)],
                                          schema=self.schema)


class AgentRun:
    """One agent's outputs and error policy as a task applies them (the worker's rules)."""

    def __init__(self, app_spec: str, agent_name: str) -> None:
        self._setup(load_app(app_spec), agent_name)

    @classmethod
    def for_app(cls, app: Any, agent_name: str) -> "AgentRun":
        """A run over an app object already imported (tests, the driver)."""
        run = cls.__new__(cls)
        run._setup(app, agent_name)  # noqa: SLF001 - the class's own set-up, called from its factory
        return run

    def _setup(self, app: Any, agent_name: str) -> None:
        from ..agents.agent import Agent

        self.app = app
        self.agent: Agent = app.agents[agent_name]
        self.sinks = [sink.topic if isinstance(sink, Agent) else sink for sink in self.agent.sinks]
        self.errors = ErrorPolicy(app.conf.error_policy, app.id, app.dlq_topic_name)  # the worker's rules
        self.out = SinkRows()

    def emit(self, event: Event, value: Any) -> None:
        for sink in self.sinks:
            self.out.add(sink.name, sink.key_codec.encode(event.key), sink.value_codec.encode(value))

    def failed(self, stage: str, message: Message, exc: BaseException) -> None:
        """The worker's error policy (runtime/dead_letters.py); a dead letter becomes an output
        row of the task, ``stop`` fails the task (and the query) with the reason."""
        letter = self.errors.judge(stage, message, exc)
        if letter is not None:
            key, value, headers = letter
            self.out.add(self.errors.dlq_topic, key, value, headers)

    def decode(self, messages: list[Message]) -> list[Event]:
        """The records decoded as the worker's router does: each with its own topic's codecs (a
        windowed join reads two topics of different types)."""
        members = self.agent.topic.members
        if len(members) == 1:
            return self._decode(members[0], messages)
        by_topic: dict[str, list[Message]] = {}
        for message in messages:
            by_topic.setdefault(message.topic, []).append(message)
        codecs = {member.name: member for member in members}
        return [event for name, some in by_topic.items() for event in self._decode(codecs[name], some)]

    def _decode(self, topic: Any, messages: list[Message]) -> list[Event]:
        events, failures = decode_batch(messages, topic.key_codec, topic.value_codec)
        for message, exc in failures:
            self.failed("decode", message, exc)
        return events


def messages_of(batch: pa.RecordBatch) -> list[Message]:
    """Rows of the source's schema back into Messages (column-wise: no per-row dicts)."""
    column = batch.column
    stamps = pc.divide(column("timestamp").cast(pa.int64()), 1000).to_pylist()  # µs → ms, as Kafka has it
    headers = column("headers")
    header_lists = ([None] * batch.num_rows if headers.null_count == batch.num_rows else
                    [[(h["key"], h["value"]) for h in hs] if hs else None for hs in headers.to_pylist()])
    return list(map(Message, column("topic").to_pylist(), column("partition").to_pylist(),
                    column("offset").to_pylist(), column("key").to_pylist(), column("value").to_pylist(),
                    header_lists, stamps))


async def drive(run: AgentRun, events: list[Event], *, stream_type: type[Stream] = Stream,
                body: Any = None) -> None:
    """Feed ``events`` through the agent's body (``agent.fun`` unless ``body``; a generator's
    outputs to its sinks, a coroutine's effects in its tables) under the worker's own supervision
    loop (agents/supervision.py): a body that returns after taking records runs again on the same
    stream, a failing record is retried ``agent_retries`` times and then given to the error
    policy; the stream's end (EndOfInput) ends the task's batch. ``stream_type``: a keyed
    agent's stream (spark/keyed.py)."""
    agent = run.agent
    fun = body or agent.fun
    batch = Batch(TP(events[0].topic, events[0].partition), events)
    subscriber = Subscriber(f"spark:{agent.name}", 1)
    subscriber.inbox = _FiniteInbox(batch)  # type: ignore[assignment]
    stream = stream_type(subscriber, topic=agent.topic)

    async def run_once(stream: Stream) -> None:
        progress = (batch.acked, len(stream.held_events()))
        result = fun(stream)
        if inspect.isasyncgen(result):
            async for output in result:
                run.emit(processing.get(), output)
        else:
            await result
        if (batch.acked, len(stream.held_events())) == progress:
            raise RuntimeError(f"agent {agent.name} returned without taking a record")

    async def nothing() -> None:
        pass

    async def crashed(exc: BaseException) -> None:
        raise exc

    async def give_up(held: Any, exc: BaseException) -> None:
        for event in held:
            run.failed(f"agent {agent.name}", event.message, exc)

    try:
        await supervise(stream, run_once, retries=run.app.conf.agent_retries, give_up=give_up,
                        returned=nothing, crashed=crashed, no_retry=agent.no_retry_types())
    except EndOfInput:
        return


class AgentTask:
    """The ``mapInArrow`` function of a stateless agent (pickled to tasks: names, not objects)."""

    def __init__(self, app_spec: str, agent_name: str) -> None:
        self.app_spec, self.agent_name = app_spec, agent_name

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            run = AgentRun(self.app_spec, self.agent_name)
        except Exception as exc:
            raise task_failed(self.agent_name, BEFORE_ANY_RECORD, exc) from exc
        loop = asyncio.new_event_loop()
        try:
            for batch in batches:
                try:
                    events = run.decode(messages_of(batch))
                    if events:
                        loop.run_until_complete(drive(run, events))
                except Exception as exc:  # the policy's stop, or streamkit's own failure
                    raise task_failed(self.agent_name, _where(batch), exc) from exc
                yield run.out.batch()
                run.out = SinkRows()
        finally:
            loop.close()


def _where(batch: pa.RecordBatch) -> str:
    """``topic[partition]`` of a task's batch (one Kafka partition a task)."""
    if batch.num_rows == 0:
        return "an empty batch"
    return f"{batch.column('topic')[0].as_py()}[{batch.column('partition')[0].as_py()}]"


def fold_processor(app_spec: str, agent_name: str, partitions: int) -> Any:
    """A StatefulProcessor running the agent's fold step over each (partition, key)'s records; ``partitions``:
    its table's count as the driver settled it (a task's freshly imported table has not)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    from ..tables.task_keys import WrongPartition
    from ..transport.partitioner import partition_for_key
    from .row_access import message_of, named_rows

    state_schema = StructType([StructField("state", BinaryType(), True)])

    class FoldProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            try:
                self.run = AgentRun(app_spec, agent_name)
            except Exception as exc:
                raise task_failed(agent_name, BEFORE_ANY_RECORD, exc) from exc
            fold = self.run.agent.fold
            assert fold is not None  # built for fold agents only (facade)
            self.fold = fold
            self.state = handle.getValueState("state", state_schema)

        def handleInputRows(self, key: Any, rows_in: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            run = self.run
            ordered = sorted(named_rows(rows_in), key=lambda r: (r.partition, r.offset))
            run.out = SinkRows()
            try:
                events = run.decode([message_of(r) for r in ordered])
                if events:  # none when every record failed to decode: only their DLQ rows go out
                    self._fold(events)
            except Exception as exc:  # the policy's stop, or streamkit's own failure
                where = f"{ordered[0].topic}[{ordered[0].partition}]" if ordered else "an empty group"
                raise task_failed(agent_name, where, exc) from exc
            yield from run.out.rows()

        def _fold(self, events: list[Event]) -> None:
            """Apply the step to one key's records of one partition (the group); its final state
            goes to the table's changelog. A key that hashes to another partition lives in the
            record's, as in the worker (tables/task_keys.py), unless the table is strict."""
            run, fold, table = self.run, self.fold, self.fold.table
            state = table.value_codec.decode(self.state.get()[0]) if self.state.exists() else fold.initial()
            # One key and one partition per call: the key's encoding and home are the same for every record.
            key_bytes = table.key_codec.encode(events[0].key) or b""
            home, number = partition_for_key(key_bytes, partitions), events[0].partition
            refused = number != home and (table.key_partitioning == "strict" or number >= partitions)
            changed = False
            for event in events:
                if refused:  # as the worker's table refuses it
                    why = ("the table is declared key_partitioning='strict'" if number < partitions else
                           f"the table has only {partitions} partitions")
                    run.failed(f"agent {run.agent.name}", event.message, WrongPartition(
                        f"table {table.name!r}: key {event.key!r} belongs to partition {home}, "
                        f"but the record came from {event.topic}[{event.partition}] and {why}"))
                    continue
                try:
                    new_state, outputs = fold.step(state, event.value)
                except Exception as exc:
                    run.failed(f"agent {run.agent.name}", event.message, exc)
                    continue
                state, changed = new_state, True
                for output in outputs:
                    run.emit(event, output)
            if changed:
                encoded = table.value_codec.encode(state)
                self.state.update((encoded,))
                run.out.add(table.changelog.name, key_bytes, encoded, partition=number)

        def close(self) -> None:
            pass

    return FoldProcessor()
