"""Agents with windowed tables on Spark: one state per table partition, as a worker's task has.

A windowed table closes windows by its partition's *stream time* (the largest event time that
partition's records carried), so its answers depend on which records share a partition and in
which order they come, not only on each key's records. Spark runs such an agent as Kafka Streams
runs a task: stage one (``mapInArrow``, spark/keyed.RekeyTask) gives each record its key after
the agent's ``group_by`` and its table partition (``home``: the record's own partition without
``group_by``, as the worker's co-partitioned table; the new key's murmur2 partition with it, as
the repartition topic's producer picks), and stage two (``transformWithState`` grouped by
``home``) runs the agent's body over that partition's records with the worker's own table code.
Records of one source partition keep their offset order; several source partitions (after a
``group_by``) are merged by timestamp, as Kafka Streams' PartitionGroup picks the head with the
smallest timestamp.

The partition's entries (windows, the stream time) live in Spark's state store (a MapState);
each micro-batch loads them into the table partition's store, and the batch's changes go back
to it, to the table's changelog (the worker's records: a worker continues from Spark's windows
and stream time) and, for windows that closed, to ``.final(topic)``, in the sink's transaction.
"""
from __future__ import annotations

import asyncio
import heapq
import operator
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa

from ..errors import SparkUnsupported
from ..joins.windowed import JoinStream
from ..runtime.dead_letters import dead_letter_headers
from ..runtime.event import Event
from ..streams.stream import Stream
from ..tables.stores import MemoryStore
from ..tables.table import Table, TablePartition
from ..tables.window_api import WindowWrapper
from ..transport.partitioner import partition_for_key
from . import rows
from .agents import BEFORE_ANY_RECORD, AgentRun, drive, window_join_of
from .collector import task_ended, task_started
from .keyed import DEAD, RekeyTask, _KeyedStream, plan, tables_of
from .references import referenced
from .row_access import message_of, millis, named_rows, pass_dead_letter
from .task_errors import task_failed

if TYPE_CHECKING:
    from ..agents.agent import Agent

HOME = "home"


def windowed_tables(agent: "Agent") -> list[Table]:
    """The windowed tables the agent's body uses (empty: not a partition-state agent)."""
    return [table for table in tables_of(agent) if table.window is not None]


def check_windows(agent: "Agent") -> None:
    """Refuse what a replayable Spark task cannot reproduce, with the reason."""
    what = f"agent {agent.name!r} cannot run on Spark"
    for name, value in referenced(agent.source_fun).items():
        if isinstance(value, WindowWrapper) and value.relative_to == "now":
            raise SparkUnsupported(f"{what}: windowed table {value.name!r} ({name}) is relative_to_now(): the wall "
                                   "clock of a task Spark may run again; use relative_to_stream() or "
                                   "relative_to_field(Model.field)")
    for table in windowed_tables(agent):
        if table.on_window_close is not None:
            raise SparkUnsupported(f"{what}: windowed table {table.name!r} has on_window_close=, a callback Spark "
                                   "could run twice (a retried task) or after the output it should follow; send "
                                   "each window's final value to a topic with .final(topic) and consume that")


def staged_schema() -> Any:
    """Stage one's rows: the raw record (new key) plus its table partition."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    return StructType([*rows.RAW_SCHEMA.fields, StructField(HOME, IntegerType(), False)])


class HomeTask(RekeyTask):
    """Stage one: each record with its new key and its table partition ``home`` (DEAD for a
    dead letter passed through)."""

    def __init__(self, app_spec: str, agent_name: str, partitions: int, grouped: bool) -> None:
        super().__init__(app_spec, agent_name)
        self.partitions, self.grouped = partitions, grouped

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in super().__call__(batches):
            sources = batch.column("partition").to_pylist()
            if self.grouped:
                homes = [DEAD if p == DEAD else partition_for_key(k or b"", self.partitions)
                         for p, k in zip(sources, batch.column("key").to_pylist(), strict=True)]
            else:
                homes = sources
            yield batch.append_column(pa.field(HOME, pa.int32(), False), pa.array(homes, pa.int32()))


def in_task_order(records: list[Any], topics: tuple[str, ...] = ()) -> list[Any]:
    """One source partition's records in offset order; several merged by timestamp, as a worker's
    task picks the earliest head (ties: the first of ``topics``, a join's left side, then the
    lower partition), joins/aligned.py's order for a windowed join's two sides. ``records``:
    named rows (row_access.named_rows)."""
    by_source: dict[tuple[int, int], list[Any]] = {}
    rank = {name: i for i, name in enumerate(topics)}
    for r in records:
        by_source.setdefault((rank.get(r.topic, 0), r.partition), []).append(r)
    lists = [sorted(rs, key=_offset) for _, rs in sorted(by_source.items())]
    if len(lists) == 1:
        return lists[0]
    # heapq.merge hands out the smallest head, the earlier list first on ties: the worker's pick
    return list(heapq.merge(*lists, key=_time_or_first))


class SparkJoinStream(JoinStream):
    """A windowed join's stream in a task: the worker's (each record through ``WindowJoin.process``,
    each output keyed by its record), over the task's records already in the worker's order
    (``in_task_order``), so no time alignment against a consumer."""

    async def _next_batch(self, timeout: float | None) -> Event | None:
        return await Stream._next_batch(self, timeout)  # noqa: SLF001 - the plain stream's inbox read, not the aligner's


_offset = operator.attrgetter("offset")


def _time_or_first(row: Any) -> int:
    """A row's timestamp in ms; one without comes first."""
    stamp = millis(row.timestamp)
    return -1 if stamp is None else stamp


def partition_processor(app_spec: str, agent_name: str, partitions: int) -> Any:
    """Stage two: a StatefulProcessor running the agent over one table partition's records."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    key_schema = StructType([StructField("key", BinaryType(), False)])
    value_schema = StructType([StructField("value", BinaryType(), True)])

    class PartitionAgentProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            try:
                self.run = AgentRun(app_spec, agent_name)
                self.plan = plan(self.run.agent)
            except Exception as exc:
                raise task_failed(agent_name, BEFORE_ANY_RECORD, exc) from exc
            for table in self.plan.tables:
                if table.window is not None:  # idleness is the worker's wall clock: not replayable here
                    table.window.close_idle_after = None
            self.join = window_join_of(self.run.agent)
            self.topics: tuple[str, ...] = ()
            self.stream_type: type[Stream] = _KeyedStream
            if self.join is not None:
                self.join.window.close_idle_after = None
                self.topics, self.stream_type = self.join.streams, SparkJoinStream
            self.states = {t.name: handle.getMapState(f"table-{t.name}", key_schema, value_schema)
                           for t in self.plan.tables}
            self.loop = asyncio.new_event_loop()
            task_started(self.run.app)

        def handleInputRows(self, key: Any, rows_in: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            home = key[0]
            run = self.run
            run.out = type(run.out)()
            records = named_rows(rows_in)
            if home == DEAD:
                for r in records:
                    pass_dead_letter(run.out, r)
            elif records:
                ordered = in_task_order(records, self.topics)
                try:
                    self._process(home, ordered)
                except Exception as exc:  # the policy's stop, or streamkit's own failure
                    raise task_failed(agent_name, f"{ordered[0].topic}[{ordered[0].partition}]", exc) from exc
            yield from run.out.rows()

        def _process(self, home: int, records: list[Any]) -> None:
            run, agent = self.run, self.run.agent
            for table in self.plan.tables:
                store = MemoryStore()
                for (key_bytes,), (value,) in self.states[table.name].iterator():
                    store.data[key_bytes] = value
                part = TablePartition(home, store)
                part.ready = True
                table.partitions, table.local = partitions, {home: part}
            decode_key = self.plan.key_codec.decode  # the group_by key's, or the topics' (a join's: alike)
            codecs = {member.name: member for member in agent.topic.members}
            events = []
            for r in records:
                topic = codecs[r.topic]
                message = message_of(r, partition=home)
                try:
                    events.append(Event(decode_key(r.key) if r.key is not None else None,
                                        topic.value_codec.decode(r.value), message))
                except Exception as exc:  # decoded in stage one already: only a codec that changed
                    run.failed("decode", message, exc)
            if events:
                self.loop.run_until_complete(drive(run, events, stream_type=self.stream_type, body=agent.source_fun))
            for table in self.plan.tables:
                self._checkpoint(table, home)

        def _checkpoint(self, table: Table, home: int) -> None:
            """The worker's checkpoint for this partition: changes to the state store and the
            changelog, closed windows to ``.final(topic)``, late records to the dead letters."""
            run, state = self.run, self.states[table.name]
            for number, batch in table.take_changes().items():
                for key_bytes, value in batch.items():
                    if value is None:
                        state.removeKey((key_bytes,))
                    else:
                        state.updateValue((key_bytes,), (value,))
                    run.out.add(table.changelog.name, key_bytes, value, partition=number)
            for number in table.emitting() if table.window is not None else ():
                closed, late = table.take_emits(number)  # type: ignore[attr-defined]
                final = table.final_topic  # type: ignore[attr-defined]
                for _key, window, value, key_bytes in closed:
                    if final is not None:
                        run.out.add(final.name, key_bytes, table.final_record(window, value),  # type: ignore[attr-defined]
                                    partition=number)
                for message, reason in late:  # late="dead-letter"
                    headers = dead_letter_headers(message, reason, "window", run.app.id)
                    run.out.add(run.errors.dlq_topic, message.key, message.value, headers)
            table.local = {}

        def close(self) -> None:
            self.loop.close()
            task_ended(self.run.app)

    return PartitionAgentProcessor()
