"""Agents with tables on Spark, written as for the worker: ``async for p in stream.group_by(Pay.user):
totals[p.user] += p.amount``.

The worker re-keys such a stream through a repartition topic and keeps each key's entry in the
table partition its key hashes to. On Spark the same agent runs in two stages: ``mapInArrow``
computes each record's new key with the agent's own ``group_by`` key and the repartition topic's
key encoding (``RekeyTask``; the record's own key without ``group_by``), and
``transformWithState`` groups by it and runs the agent's body over each key's records
(``keyed_processor``), its tables holding that one key's entry, kept in Spark's state store
between micro-batches. Each key's final entry also goes to the table's changelog, in the
partition the worker's table keeps it in, so a worker continues from Spark's state (as folds do).

What the body may touch is the current key: reading or writing another key's entry fails the
record with one line naming the key (``OtherKey``), as no other key's state is in this task.
The ``group_by`` is found by running the body once against a planning stream, on the driver
and again in each task (``plan``), as the worker finds its repartition topics.
"""
from __future__ import annotations

import asyncio
import inspect
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pyarrow as pa

from ..agents.rekeying import group_key
from ..errors import ConfigurationError, NoRetry
from ..joins.tables import JoinedTable
from ..runtime.event import Event, processing
from ..runtime.inbox import Subscriber
from ..streams.stream import Stream
from ..tables.marks import MARK_KEY
from ..tables.stores import MemoryStore
from ..tables.table import Table, TablePartition
from ..transport.partitioner import partition_for_key
from . import rows
from .agents import BEFORE_ANY_RECORD, AgentRun, _where, drive, messages_of, window_join_of
from .collector import task_ended, task_started
from .references import referenced
from .row_access import message_of, named_rows, pass_dead_letter
from .task_errors import task_failed

if TYPE_CHECKING:
    from ..agents.agent import Agent

DEAD = -1  # the partition column of a stage-one row that is a dead letter, passed through


_by_position = operator.attrgetter("partition", "offset")  # a key's records in each partition's order


class OtherKey(NoRetry, KeyError):
    """An agent on Spark touched a table entry of a key other than its record's."""

    def __str__(self) -> str:
        return str(self.args[0])


class _PlanEnd(BaseException):
    """Ends a planning run of an agent's body (BaseException: ``except Exception`` lets it pass)."""


class _PlanningStream(Stream):
    """The stream a planning run hands the body: it notes ``group_by`` and the tables it joins,
    and ends the run at the first record asked for."""

    def __init__(self, agent: "Agent") -> None:
        super().__init__(Subscriber(f"spark-plan:{agent.name}", 1), topic=agent.topic)
        self.grouped: tuple[Any, ...] | None = None
        self.joined: list[Table] = []
        self.lookup: tuple[Table, Callable[[Any], Any] | None] | None = None  # a GlobalTable join

    def group_by(self, key: Any, *, name: str | None = None, partitions: int | None = None,
                 key_type: Any = None, value_type: Any = None) -> "Stream":
        if self.grouped is not None:
            raise ConfigurationError("on Spark an agent re-keys its stream once (one group_by or join on=)")
        self.grouped = (key, name, key_type)
        return self

    def join(self, table: Any, *, on: Any = None, how: str = "inner", as_of: bool = False) -> Any:
        """A stream-table join: its table's changelog becomes a second input (spark/keyed.py);
        ``on=`` re-keys the stream as the worker's join does (joins/lookup.py)."""
        from ..joins.lookup import key_function
        from ..joins.tables import JoinedTable

        if not isinstance(table, Table) or table.window is not None:
            raise _PlanEnd  # the worker's own checks (and check_runnable) say why
        if as_of or isinstance(table, JoinedTable):
            what = "an as-of join" if as_of else f"a join with table-table join {table.name!r}"
            raise ConfigurationError(f"{what} is not built on Spark yet: run this agent on workers")
        self.joined.append(table)
        if table.is_global:  # looked up where the key is (spark/lookups.py): the stream keeps its keys
            self.lookup = (table, None if on is None else key_function(on)[1])
            return self
        if on is not None:
            field, _ = key_function(on)
            self.group_by(on, name=f"{table.name}-join-{field if field.isidentifier() else 'key'}")
        return self

    async def next_event(self, timeout: float | None = None) -> Event | None:
        raise _PlanEnd


@dataclass
class KeyedPlan:
    """How a keyed agent runs on Spark: its re-keying (None: the record's own key), its tables,
    and the tables it joins (their changelogs are inputs too)."""

    key_of: Callable[[Any], Any] | None
    key_codec: Any
    tables: list[Table]
    joined: list[Table]
    lookup: tuple[Table, Callable[[Any], Any] | None] | None = None  # a GlobalTable join: (table, on=)

    def changelogs(self) -> dict[str, Table]:
        """The joined tables by changelog topic name."""
        return {table.changelog.name: table for table in self.joined}


def tables_of(agent: "Agent") -> list[Table]:
    """The tables the agent's body refers to (globals and closure), in a stable order."""
    from ..tables.window_api import WindowWrapper

    values = [v.table if isinstance(v, WindowWrapper) else v for v in referenced(agent.source_fun).values()]
    found = {id(v): v for v in values if isinstance(v, Table)}
    return sorted(found.values(), key=lambda table: table.name)


def plan(agent: "Agent") -> KeyedPlan:
    """Run the body against a planning stream: the ``group_by`` it asks for, if any."""
    stream = _PlanningStream(agent)

    async def body() -> None:
        result = agent.source_fun(stream)
        if inspect.isasyncgen(result):
            async for _ in result:
                pass
        else:
            await result

    try:
        asyncio.run(body())
    except _PlanEnd:
        pass
    except ConfigurationError as exc:
        raise ConfigurationError(f"agent {agent.name!r} cannot run on Spark: {exc}") from None
    except Exception as exc:
        raise ConfigurationError(f"agent {agent.name!r} cannot run on Spark: its body failed before its first "
                                 f"record ({type(exc).__name__}: {exc}); on Spark a group_by must be called on the "
                                 "agent's own stream (not after filter/map)") from None
    tables = tables_of(agent)
    join = window_join_of(agent)
    if join is not None:  # its buffer is the partition's state (spark/partitioned.py)
        if stream.grouped is not None:
            raise ConfigurationError(f"agent {agent.name!r} cannot run on Spark: it re-keys a windowed join's "
                                     "pairs; yield them to a topic and group_by in the agent reading it")
        tables = sorted([*tables, join.buffer], key=lambda table: table.name)
    if stream.lookup is not None:
        table = stream.lookup[0]
        refuse_table_joins(agent, [t for t in tables if t is not table], "joins a GlobalTable")
        others = [t.name for t in tables if t is not table]
        if stream.grouped is not None or others:
            beside = "group_by" if stream.grouped is not None else f"table(s) {', '.join(map(repr, others))}"
            raise ConfigurationError(f"agent {agent.name!r} cannot run on Spark: it joins GlobalTable {table.name!r} "
                                     f"and uses {beside}; on Spark a GlobalTable join runs by the looked-up key, "
                                     "the other by the record's: split the agent in two (the join's output topic "
                                     "feeding the other)")
        return KeyedPlan(None, agent.topic.key_codec, [], [table], lookup=stream.lookup)
    if join is not None or any(table.window is not None for table in tables):
        refuse_table_joins(agent, tables, "runs per partition there (a windowed table or join)")
        joined = stream.joined
    else:
        tables, joined = with_table_joins(tables, stream.joined)
    if stream.grouped is None:
        return KeyedPlan(None, agent.topic.key_codec, tables, joined)
    key, name, key_type = stream.grouped
    field, key_fn = group_key(key, name)
    source_type = agent.topic.value_type
    if key_type is None and field and isinstance(source_type, type):
        key_type = getattr(source_type, "__annotations__", {}).get(field)
        key_type = key_type if isinstance(key_type, type) else None
    topic = agent.app.topic(f"{agent.app.id}-{agent.name}-{name or field}-repartition", key_type=key_type,
                            value_type=source_type)
    return KeyedPlan(key_fn, topic.key_codec, tables, joined)


def table_joins_of(tables: list[Table]) -> list[Any]:
    """The table-table joins (joins/tables.py) one of ``tables`` is a side of."""
    from ..joins.tables import JoinedTable

    if not tables:
        return []
    found = [t for t in tables[0].app.tables.values() if isinstance(t, JoinedTable)
             and any(t.left is side or t.right is side for side in tables)]
    return sorted(found, key=lambda table: table.name)


def with_table_joins(tables: list[Table], joined: list[Table]) -> tuple[list[Table], list[Table]]:
    """A per-key agent writing a side of a table-table join keeps the joined table up to date as
    the worker's checkpoint does: the joined table is one of its tables (after the sides), and
    the other side's changelog and the joined table's own are read beside the stream, so the
    other side's value and the joined entry (whoever wrote them) are in the key's state. One
    reading a joined table gets both sides' changelogs read the same way."""
    materialised = [t for t in table_joins_of(tables) if not any(t is x for x in tables)]  # `is`: tables are dicts
    read_directly = [t for t in tables if isinstance(t, JoinedTable)]  # read from its sides: they are loaded too
    read: list[Table] = []
    for table in [*materialised, *read_directly]:
        read += [side for side in (table.left, table.right) if not any(side is x for x in [*tables, *joined])]
        read.append(table)
    unique = list({id(side): side for side in read}.values())
    return [*tables, *materialised], [*joined, *unique]


def refuse_table_joins(agent: "Agent", tables: list[Table], why: str) -> None:
    """An agent whose tables feed a table-table join but which Spark cannot run per key."""
    found = table_joins_of([t for t in tables if t.window is None])
    if found:
        names = ", ".join(f"{t.name!r} ({t.left.name} x {t.right.name})" for t in found)
        raise ConfigurationError(f"agent {agent.name!r} cannot run on Spark: it writes a side of table-table join "
                                 f"{names}, which Spark keeps up to date in per-key agents only, and this agent "
                                 f"{why}: write the side from an agent of its own (or run this one on workers)")


class RekeyTask:
    """Stage one (``mapInArrow``): the records with their new key; dead letters passed through
    as rows of partition ``DEAD`` (pickled to tasks: names, not objects)."""

    def __init__(self, app_spec: str, agent_name: str) -> None:
        self.app_spec, self.agent_name = app_spec, agent_name

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            run = AgentRun(self.app_spec, self.agent_name)
            keyed = plan(run.agent)
        except Exception as exc:
            raise task_failed(self.agent_name, BEFORE_ANY_RECORD, exc) from exc
        schema = rows.arrow_schema(rows.RAW_SCHEMA)
        task_started(run.app)
        try:
            for batch in batches:
                try:
                    out = self._rekey(run, keyed, batch)
                except Exception as exc:
                    raise task_failed(self.agent_name, _where(batch), exc) from exc
                if out.num_rows:
                    yield out
                dead = run.out
                if dead.topic:
                    yield pa.RecordBatch.from_arrays([
                        pa.array(dead.topic, pa.string()), pa.array([DEAD] * len(dead.topic), pa.int32()),
                        pa.array([DEAD] * len(dead.topic), pa.int64()),
                        pa.nulls(len(dead.topic), schema.field("timestamp").type),
                        pa.array(dead.key, pa.binary()), pa.array(dead.value, pa.binary()),
                        pa.array(dead.headers, schema.field("headers").type)], schema=schema)
                    run.out = type(dead)()
        finally:
            task_ended(run.app)

    def _rekey(self, run: AgentRun, keyed: KeyedPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
        if batch.num_rows and batch.column("topic")[0].as_py() in keyed.changelogs():
            return _table_updates(keyed, batch)
        whole = _rekey_whole(run, keyed, batch)
        if whole is not None:
            return whole
        messages = messages_of(batch)
        index = {id(m): i for i, m in enumerate(messages)}
        keep: list[int] = []
        keys: list[bytes | None] = []
        for event in run.decode(messages):
            try:
                key_bytes = (event.message.key if keyed.key_of is None
                             else keyed.key_codec.encode(keyed.key_of(event.value)))
            except Exception as exc:  # the group_by key failed on this value: the error policy's
                processing.set(event)
                run.failed(f"agent {run.agent.name}", event.message, exc)
                continue
            keep.append(index[id(event.message)])
            keys.append(key_bytes)
        taken = batch.take(pa.array(keep, pa.int64()))
        at = taken.schema.get_field_index("key")
        return taken.set_column(at, taken.schema.field(at), pa.array(keys, pa.binary()))


def _rekey_whole(run: AgentRun, keyed: KeyedPlan, batch: pa.RecordBatch) -> pa.RecordBatch | None:
    """The usual batch a column at a time, without a Message or Event per record: every record
    decodes (``Codec.decode_many``, as decode_batch's first try) and every new key computes. None
    when one does not (or the agent reads several topics): the record-by-record path says which."""
    members = run.agent.topic.members
    if len(members) != 1 or not batch.num_rows:
        return None
    topic = members[0]
    try:
        topic.key_codec.decode_many(batch.column("key").to_pylist())
        values = topic.value_codec.decode_many(batch.column("value").to_pylist())
        if keyed.key_of is None:
            return batch
        key_of, encode = keyed.key_of, keyed.key_codec.encode
        keys = [encode(key_of(value)) for value in values]
    except Exception:  # noqa: BLE001 - which record, and its own error, is found record by record
        return None
    at = batch.schema.get_field_index("key")
    return batch.set_column(at, batch.schema.field(at), pa.array(keys, pa.binary()))


def _table_updates(keyed: KeyedPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
    """A joined table's changelog rows (one topic a batch), keyed as the joined stream is: the
    table's key bytes through the stream's key codec, so both meet in one group; marks dropped."""
    table = keyed.changelogs()[batch.column("topic")[0].as_py()]
    keep: list[int] = []
    keys: list[bytes | None] = []
    for i, key_bytes in enumerate(batch.column("key").to_pylist()):
        if key_bytes is None or key_bytes == MARK_KEY:
            continue
        keep.append(i)
        keys.append(keyed.key_codec.encode(table.key_codec.decode(key_bytes)))
    taken = batch.take(pa.array(keep, pa.int64()))
    at = taken.schema.get_field_index("key")
    return taken.set_column(at, taken.schema.field(at), pa.array(keys, pa.binary()))


class _OneKeyCache(dict):
    """A table partition's write cache that takes the current key only."""

    def __init__(self, table: Table, key_bytes: bytes) -> None:
        super().__init__()
        self.table, self.key_bytes = table, key_bytes

    def __setitem__(self, key_bytes: bytes, value: Any) -> None:
        if key_bytes != self.key_bytes:
            raise _other_key(self.table, key_bytes, self.key_bytes)
        super().__setitem__(key_bytes, value)


class _OneKeyStore(MemoryStore):
    """A table partition's store holding the current key's entry from Spark's state; any other
    key is not here (another task has it)."""

    def __init__(self, table: Table, key_bytes: bytes, stored: bytes | None) -> None:
        super().__init__()
        self.table, self.key_bytes = table, key_bytes
        if stored is not None:
            self.data[key_bytes] = stored

    def get(self, key: bytes) -> bytes | None:
        if key != self.key_bytes:
            raise _other_key(self.table, key, self.key_bytes)
        return self.data.get(key)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        raise OtherKey(f"table {self.table.name!r}: iterating a table reads every key; on Spark an agent reads and "
                       "writes its record's key only (run this agent on workers, or keep what it needs per key)")


def _other_key(table: Table, key_bytes: bytes, current: bytes) -> OtherKey:
    return OtherKey(f"table {table.name!r}: key {key_bytes!r} is not the record's key {current!r}; on Spark an agent "
                    "reads and writes its record's key only (group_by the key it uses, or run this agent on workers)")


class _KeyedStream(Stream):
    """The stream a task hands the body: the key's records, already re-keyed (``group_by``
    gives the stream itself)."""

    def group_by(self, key: Any, **options: Any) -> "Stream":
        return self

    def join(self, table: Any, *, on: Any = None, how: str = "inner", as_of: bool = False) -> Any:
        """The worker's lookups, by the record's key: the stream is keyed by ``on`` already."""
        from ..joins.lookup import stream_table_join

        return stream_table_join(self, table, on=on if table.is_global else None, how=how, as_of=as_of)


def keyed_processor(app_spec: str, agent_name: str, partitions: int) -> Any:
    """Stage two: a StatefulProcessor running the agent over each key's records, its tables
    holding that key's entries (``partitions``: the tables' count as the driver settled it)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    state_schema = StructType([StructField("value", BinaryType(), True)])

    class KeyedAgentProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            try:
                self.run = AgentRun(app_spec, agent_name)
                self.plan = plan(self.run.agent)
            except Exception as exc:
                raise task_failed(agent_name, BEFORE_ANY_RECORD, exc) from exc
            sides = [*self.plan.tables, *self.plan.joined]
            self.tables = {t.name: t for t in sorted(sides, key=lambda t: isinstance(t, JoinedTable))}
            self.updates = {name: t.name for name, t in self.plan.changelogs().items()}
            self.states = {name: handle.getValueState(f"table-{name}", state_schema) for name in self.tables}
            self.loop = asyncio.new_event_loop()
            task_started(self.run.app)

        def handleInputRows(self, key: Any, rows_in: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            run = self.run
            run.out = type(run.out)()
            ordered = sorted(named_rows(rows_in), key=_by_position)
            updates = self.updates
            records = [r for r in ordered if r.partition != DEAD and r.topic not in updates]
            if len(records) < len(ordered):
                for r in ordered:
                    if r.partition == DEAD:
                        pass_dead_letter(run.out, r)
                    elif r.topic in updates:  # a joined table's changes of this micro-batch come first
                        state = self.states[updates[r.topic]]
                        state.update((r.value,)) if r.value is not None else state.clear()
            if records:
                try:
                    self._process(records)
                except Exception as exc:  # the policy's stop, or streamkit's own failure
                    raise task_failed(agent_name, f"{records[0].topic}[{records[0].partition}]", exc) from exc
            yield from run.out.rows()

        def _process(self, records: list[Any]) -> None:
            run, agent = self.run, self.run.agent
            key_bytes = records[0].key or b""
            home = partition_for_key(key_bytes, partitions)
            new_key = self.plan.key_codec.decode(key_bytes)
            entries = {}  # each table's own key bytes for the key
            for table in self.tables.values():
                state = self.states[table.name]
                entry = entries[table.name] = table.key_codec.encode(new_key) or b""
                stored = state.get()  # None when the key has no entry yet
                part = TablePartition(home, _OneKeyStore(table, entry, None if stored is None else stored[0]))
                part.cache, part.ready = _OneKeyCache(table, entry), True
                table.partitions, table.local = partitions, {home: part}
            decode = agent.topic.value_codec.decode
            events = []
            for r in records:
                message = message_of(r, partition=home, key=key_bytes)
                try:
                    events.append(Event(new_key, decode(r.value), message))
                except Exception as exc:  # decoded in stage one already: only a codec that changed
                    run.failed("decode", message, exc)
            if events:
                self.loop.run_until_complete(drive(run, events, stream_type=_KeyedStream, body=agent.source_fun))
            for table in self.tables.values():  # a table-table join's after its sides: it reads what they changed
                change = table.take_changes().get(home, {})
                entry = entries[table.name]
                if entry in change:
                    value = change[entry]
                    state = self.states[table.name]
                    state.update((value,)) if value is not None else state.clear()
                    run.out.add(table.changelog.name, entry, value, partition=home)
            for table in self.tables.values():
                table.local = {}

        def close(self) -> None:
            self.loop.close()
            task_ended(self.run.app)

    return KeyedAgentProcessor()
