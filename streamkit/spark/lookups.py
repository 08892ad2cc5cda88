"""Stream-GlobalTable joins on Spark: ``stream.join(rates, on=Pay.currency)`` as on workers.

A worker holds every key of a GlobalTable and looks a record's join key up where the record is:
the record keeps its key and partition. On Spark no task holds the whole table, so the lookup
goes to the key instead: stage one (``mapInArrow``, ``LookupTask``) gives each record a
``lookup`` column (its join key in the table's key bytes; a changelog row its own key), and
``transformWithState`` grouped by it applies the micro-batch's table changes for that key first,
then runs the agent's body over the records that look it up (``lookup_processor``), the table
holding that key's value from Spark's state store. Each record keeps its own key, partition and
offset, so outputs are keyed as the worker keys them.

The agent's body may read the table for its record's lookup key only (another key fails the
record in one line, ``OtherKey``); other tables and ``group_by`` beside a GlobalTable join are
refused before the query starts (their keys are not the lookup key: split the agent in two).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa

from ..runtime.event import Event
from ..tables.marks import MARK_KEY
from ..tables.table import TablePartition
from . import rows
from .agents import BEFORE_ANY_RECORD, AgentRun, drive, messages_of
from .keyed import DEAD, KeyedPlan, RekeyTask, _KeyedStream, _OneKeyCache, _OneKeyStore, plan
from .row_access import message_of, named_rows, pass_dead_letter
from .task_errors import task_failed

if TYPE_CHECKING:
    from ..tables.table import Table

LOOKUP = "lookup"


def lookup_schema() -> Any:
    """Stage one's rows: the raw record (its own key) plus the key it looks up."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    return StructType([*rows.RAW_SCHEMA.fields, StructField(LOOKUP, BinaryType(), False)])


class LookupTask(RekeyTask):
    """Stage one: each record with the table key it looks up; the joined table's changelog rows
    with their own key; dead letters passed through (partition ``DEAD``)."""

    def _rekey(self, run: AgentRun, keyed: KeyedPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
        assert keyed.lookup is not None  # the facade runs this stage for GlobalTable joins only
        table, key_of = keyed.lookup
        if batch.num_rows and batch.column("topic")[0].as_py() == table.changelog.name:
            keys = batch.column("key").to_pylist()
            keep = [i for i, k in enumerate(keys) if k is not None and k != MARK_KEY]
            taken = batch.take(pa.array(keep, pa.int64()))
            return taken.append_column(pa.field(LOOKUP, pa.binary(), False), taken.column("key"))
        messages = messages_of(batch)
        index = {id(m): i for i, m in enumerate(messages)}
        keep, lookups = [], []
        encode = table.key_codec.encode
        for event in run.decode(messages):
            try:
                lookups.append(encode(event.key if key_of is None else key_of(event.value)) or b"")
            except Exception as exc:  # the on= key failed on this value: the error policy's
                run.failed(f"agent {run.agent.name}", event.message, exc)
                continue
            keep.append(index[id(event.message)])
        taken = batch.take(pa.array(keep, pa.int64()))
        return taken.append_column(pa.field(LOOKUP, pa.binary(), False), pa.array(lookups, pa.binary()))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in super().__call__(batches):
            if LOOKUP not in batch.schema.names:  # dead letters: any group sends them
                batch = batch.append_column(pa.field(LOOKUP, pa.binary(), False),
                                            pa.array([b""] * batch.num_rows, pa.binary()))
            yield batch


def lookup_processor(app_spec: str, agent_name: str) -> Any:
    """Stage two: a StatefulProcessor running the agent over the records looking one key up,
    after that key's table changes of the micro-batch."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    state_schema = StructType([StructField("value", BinaryType(), True)])

    class LookupAgentProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            try:
                self.run = AgentRun(app_spec, agent_name)
                lookup = plan(self.run.agent).lookup
                assert lookup is not None  # the facade runs this processor for GlobalTable joins only
            except Exception as exc:
                raise task_failed(agent_name, BEFORE_ANY_RECORD, exc) from exc
            self.table: Table = lookup[0]
            self.state = handle.getValueState(f"table-{self.table.name}", state_schema)
            self.loop = asyncio.new_event_loop()

        def handleInputRows(self, key: Any, rows_in: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            run, changelog = self.run, self.table.changelog.name
            run.out = type(run.out)()
            ordered = sorted(named_rows(rows_in), key=lambda r: (r.topic == changelog, r.partition, r.offset))
            records = []
            for r in ordered:
                if r.partition == DEAD:
                    pass_dead_letter(run.out, r)
                elif r.topic == changelog:  # the table's changes of this micro-batch come first
                    self.state.update((r.value,)) if r.value is not None else self.state.clear()
                else:
                    records.append(r)
            if records:
                try:
                    self._process(key[0], records)
                except Exception as exc:  # the policy's stop, or streamkit's own failure
                    raise task_failed(agent_name, f"{records[0].topic}[{records[0].partition}]", exc) from exc
            yield from run.out.rows()

        def _process(self, entry: bytes, records: list[Any]) -> None:
            run, agent, table = self.run, self.run.agent, self.table
            number = table.partition_of(entry)
            part = TablePartition(number, _OneKeyStore(table, entry, self.state.get()[0] if self.state.exists() else None))
            part.cache, part.ready = _OneKeyCache(table, entry), True
            table.local = {number: part}
            # each its own key and partition, as the worker reads it
            events: list[Event] = run.decode([message_of(r) for r in records])
            if events:
                self.loop.run_until_complete(drive(run, events, stream_type=_KeyedStream, body=agent.source_fun))
            table.local = {}

        def close(self) -> None:
            self.loop.close()

    return LookupAgentProcessor()
