"""``app.spark``: the app's topics, tables and agents as Spark DataFrames and streaming queries."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, SparkUnsupported
from ..transport.security import confluent_common
from . import rows
from .agents import AgentTask, fold_processor
from .apps import spec_of
from .checks import check_runnable, is_keyed
from .session import spark_session
from .shipping import check_executors, forwarded_environment, is_local, ship

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from ..agents.agent import Agent
    from ..app import App
    from ..tables.table import Table
    from ..topics import Topic

log = logging.getLogger("streamkit.spark")


class SparkFacade:
    """Created on first use of ``app.spark``; the SparkSession starts on first need."""

    def __init__(self, app: "App") -> None:
        self.app = app
        self._session: "SparkSession | None" = None
        self.master = "local[2]"
        self.conf: dict[str, str] = {}  # Spark settings for the session this starts (--conf)
        self.py_files: list[str] = []  # sent to a cluster's executors besides the app's own package
        self.query_inputs: dict[str, set[str]] = {}  # query name -> the topics whose offsets a handoff commits

    @property
    def session(self) -> "SparkSession":
        if self._session is None:
            conf = self.conf if is_local(self.master) else {**forwarded_environment(), **self.conf}
            session = spark_session(self.master, conf=conf)
            self._prepare_executors(session)
            self._session = session
        return self._session

    def use(self, session: "SparkSession") -> None:
        """Run on an existing session (the data source is registered on it; on a cluster, the
        app is sent to the executors and checked there)."""
        from .session import register

        register(session)
        self._prepare_executors(session)
        self._session = session

    def _prepare_executors(self, session: "SparkSession") -> None:
        """On a cluster: send the app's package (and ``py_files``) and check that the executors
        import streamkit and the app (spark/shipping.py). ``local[N]`` shares the driver's path."""
        master = session.sparkContext.master
        assert master is not None  # a running SparkContext has its master URL
        if is_local(master):
            return
        spec = spec_of(self.app)
        check_executors(session, spec, ship(session, spec, self.py_files))

    def options(self, **extra: Any) -> dict[str, str]:
        """The data source options that connect to this app's broker."""
        opts = {f"kafka.{k}": str(v) for k, v in confluent_common(self.app.conf).items()}
        opts.update({k: str(v) for k, v in extra.items() if v is not None})
        return opts

    def _topic(self, topic: "Topic | str") -> "Topic":
        if isinstance(topic, str):
            return self.app.topics.get(topic) or self.app.topic(topic)
        return topic

    # -- DataFrames -----------------------------------------------------------------------------

    def read_topic(self, topic: "Topic | str", *, decode: bool = False, streaming: bool = False,
                   starting_offsets: str = "earliest", **options: Any) -> "DataFrame":
        """The topic's records; ``decode=True`` gives one column per field of its Record type."""
        topic = self._topic(topic)
        opts = self.options(topic=topic.name, startingOffsets=starting_offsets, **options)
        if decode:
            opts.update(decode="true", app=spec_of(self.app))
        reader = self.session.readStream if streaming else self.session.read
        return reader.format("streamkit").options(**opts).load()

    def read_table(self, table: "Table", **options: Any) -> "DataFrame":
        """A table's current contents from its changelog: the latest value per key, deletions dropped.

        Columns ``key`` and ``value`` are decoded with the table's codecs; typed values become
        Spark types, anything else its JSON text. ``options`` are the read's data source options
        (``isolation="read_uncommitted"`` to read past open transactions, for instance).
        """
        from pyspark.sql import functions as F

        from ..tables.marks import MARK_KEY

        raw = self.read_topic(table.changelog, **options).where(F.col("key") != F.lit(MARK_KEY))  # checkpoint marks
        latest = (raw.groupBy("key")
                  .agg(F.max_by("value", F.struct("partition", "offset")).alias("value"))
                  .where(F.col("value").isNotNull()))
        schema = table_schema(table)
        return latest.mapInArrow(TableDecoder(spec_of(self.app), table.name, schema), schema)

    def write_topic(self, df: "DataFrame", topic: "Topic | str", **options: Any) -> None:
        """Write ``df`` to ``topic`` (at-least-once batch write, for backfills).

        Columns ``key`` and ``value`` (binary or string) are written as they are; a DataFrame
        without ``value`` is written as JSON objects of its other columns.
        """
        from pyspark.sql import functions as F

        topic = self._topic(topic)
        if "value" not in df.columns:
            fields = [c for c in df.columns if c != "key"]
            df = df.select(*([F.col("key").cast("binary")] if "key" in df.columns else []),
                           F.to_json(F.struct(*fields)).cast("binary").alias("value"))
        df.write.format("streamkit").options(**self.options(topic=topic.name, **options)).mode("append").save()

    # -- agents ---------------------------------------------------------------------------------

    def agent(self, agent: "Agent | str") -> "Agent":
        if isinstance(agent, str):
            found = self.app.agents.get(agent)
            if found is None:
                raise ConfigurationError(f"app {self.app.id!r} has no agent {agent!r} "
                                         f"(agents: {', '.join(sorted(self.app.agents)) or 'none'})")
            return found
        return agent

    def run(self, agent: "Agent | str", *, checkpoint: str, trigger: str | None = None,
            max_offsets_per_trigger: int | None = None, handoff: bool = True,
            exactly_once: bool = True, **source_options: Any) -> "StreamingQuery":
        """Start ``agent`` as a Structured Streaming query writing exactly once to its sinks.

        ``trigger``: ``"available-now"`` (process what is there, then stop), an interval such as
        ``"10 seconds"``, or None (next batch as soon as the last ends). With ``handoff`` the
        query commits its progress to the app's consumer group, so a worker started afterwards
        continues where Spark stopped. Other keywords are options of the source (``consumeBatchSize``...).
        """
        agent = self.agent(agent)
        check_runnable(agent)
        counts = asyncio.run(self.app.ensure_topics())  # sinks and the DLQ exist before tasks write
        if agent.fold is not None:  # the fold's table takes (or must match) its topic's count; its changelog too
            from ..tables.table import resolve_partitions

            resolve_partitions([agent.fold.table], {agent.topic.name: counts[agent.topic.name]})
            asyncio.run(self.app.ensure_topics())
        keyed = is_keyed(agent)
        count = counts[agent.topic.members[0].name]  # a windowed join's two topics: one count (checked)
        if keyed:  # its tables take (or must match) the topic's count, as the worker's after a repartition
            from ..joins.checks import check_joins
            from ..tables.table import resolve_partitions
            from .keyed import plan
            from .partitioned import window_join_of

            join = window_join_of(agent)
            if join is not None:
                check_joins([join], counts)
            keyed_plan = plan(agent)  # the tables it reads changelogs of too: they exist before the query reads them
            resolve_partitions([*keyed_plan.tables, *keyed_plan.joined], {agent.topic.name: count})
            asyncio.run(self.app.ensure_topics())
        spec = spec_of(self.app)
        source = self.read_topic(agent.topic, streaming=True, maxOffsetsPerTrigger=max_offsets_per_trigger,
                                 commitGroup=self.app.id if handoff else None, **source_options)
        schema = rows.SINK_SCHEMA
        self.query_inputs[f"{self.app.id}-{agent.name}"] = {member.name for member in agent.topic.members}
        if keyed:
            output = self._keyed_stages(agent, self._with_joined(agent, source, source_options), spec, count)
        elif agent.columnar is not None:  # the function's own batches (spark/columnar.py)
            from .columnar import ColumnarTask

            output = source.mapInArrow(ColumnarTask(spec, agent.name), schema)
        elif agent.fold is None:
            output = source.mapInArrow(AgentTask(spec, agent.name), schema)
        else:
            output = (source.groupBy("partition", "key")  # a key from another partition lives in that task
                      .transformWithState(fold_processor(spec, agent.name, agent.fold.table.partitions), schema,
                                          "Append", "None"))
        marker = marker_topic(agent)
        writer = (output.writeStream.format("streamkit")
                  .options(**self.options(markerTopic=marker, transactionalIdPrefix=f"{self.app.id}-spark-{agent.name}",
                                          guarantee="exactly_once" if exactly_once else "at_least_once"))
                  .option("checkpointLocation", checkpoint)
                  .queryName(f"{self.app.id}-{agent.name}"))
        if trigger in ("available-now", "available_now", "availableNow"):
            writer = writer.trigger(availableNow=True)
        elif trigger:
            writer = writer.trigger(processingTime=trigger)
        return writer.start()


    def _with_joined(self, agent: "Agent", source: "DataFrame", options: dict[str, Any]) -> "DataFrame":
        """The agent's records plus the changelogs of the tables it joins (spark/keyed.py): each
        micro-batch's table changes meet the stream's records of the same key, first."""
        from .keyed import plan

        for table in plan(agent).joined:
            changes = self.read_topic(table.changelog, streaming=True, **options)
            source = source.unionByName(changes)
        return source

    @staticmethod
    def _keyed_stages(agent: "Agent", source: "DataFrame", spec: str, partitions: int) -> "DataFrame":
        """A table agent's two stages: per key (spark/keyed.py), or per table partition when it
        keeps windows, which close by the partition's stream time (spark/partitioned.py)."""
        from .keyed import RekeyTask, keyed_processor, plan
        from .partitioned import HOME, HomeTask, partition_processor, staged_schema, window_join_of, windowed_tables

        if plan(agent).lookup is not None:  # a GlobalTable join: by the looked-up key (spark/lookups.py)
            from .lookups import LOOKUP, LookupTask, lookup_processor, lookup_schema

            return (source.mapInArrow(LookupTask(spec, agent.name), lookup_schema()).groupBy(LOOKUP)
                    .transformWithState(lookup_processor(spec, agent.name), rows.SINK_SCHEMA, "Append", "None"))
        join = window_join_of(agent)
        if join is not None and join.window.close_idle_after is not None:
            log.warning("agent %r on Spark: windowed join %r's close_idle_after applies on workers only; on Spark "
                        "unpaired records go out by the records' stream time, and a worker started after the "
                        "backfill lets the rest go", agent.name, join.buffer.name)
        if windowed_tables(agent) or join is not None:
            if plan(agent).joined:
                raise SparkUnsupported(f"agent {agent.name!r} cannot run on Spark: it joins a table and keeps a "
                                       "windowed table, which run per key and per partition there: split it into "
                                       "two agents (the join's output topic feeding the windowed one)")
            for table in windowed_tables(agent):
                if table.window.close_idle_after is not None:
                    log.warning("agent %r on Spark: windowed table %r's close_idle_after applies on workers only; on "
                                "Spark its windows close by the records' stream time, and a worker started after "
                                "the backfill closes the rest", agent.name, table.name)
            grouped = plan(agent).key_of is not None
            return (source.mapInArrow(HomeTask(spec, agent.name, partitions, grouped), staged_schema()).groupBy(HOME)
                    .transformWithState(partition_processor(spec, agent.name, partitions), rows.SINK_SCHEMA,
                                        "Append", "None"))
        return (source.mapInArrow(RekeyTask(spec, agent.name), rows.RAW_SCHEMA).groupBy("key")
                .transformWithState(keyed_processor(spec, agent.name, partitions), rows.SINK_SCHEMA,
                                    "Append", "None"))


def handoff(facade: SparkFacade, query: "StreamingQuery") -> dict | None:
    """Commit the offsets a finished query reached to the app's consumer group, so a worker
    continues from there. (A running query commits each batch as Spark confirms it; the last
    batch of an ``available-now`` run is never confirmed that way, hence this call.)"""
    import json

    from .kafka_io import client_config, commit_group_offsets

    progress = [p for p in query.recentProgress if p["sources"]]
    if not progress:
        return None
    inputs = facade.query_inputs.get(query.name)
    offsets = {}
    for source in progress[-1]["sources"]:  # the agent's topic; not a joined table's changelog
        end = source["endOffset"]
        for topic, positions in (json.loads(end) if isinstance(end, str) else end).items():
            if inputs is None or topic in inputs:
                offsets[topic] = positions
    commit_group_offsets(client_config(facade.options()), facade.app.id, offsets)
    return offsets


def marker_topic(agent: "Agent") -> str:
    """An existing topic the query writes to, whose partition 0 carries the per-task commit markers."""
    from ..agents.agent import Agent

    if agent.sinks:
        sink = agent.sinks[0]
        return (sink.topic if isinstance(sink, Agent) else sink).name
    if agent.fold is not None:
        return agent.fold.table.changelog.name
    from .keyed import tables_of
    from .partitioned import window_join_of

    join = window_join_of(agent)
    tables = tables_of(agent) if join is None else [join.buffer]
    return tables[0].changelog.name if tables else agent.topic.name


def table_schema(table: "Table") -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    def column(name: str, tp: Any) -> StructField:
        if tp is None:
            return StructField(name, StringType(), True)
        return StructField(name, rows.spark_type(tp, f"table {table.name} {name}")[0], True)

    return StructType([column("key", table.key_type), column("value", table.value_type)])


class TableDecoder:
    """``mapInArrow`` function: changelog bytes → the table's keys and values."""

    def __init__(self, app_spec: str, table_name: str, schema: Any) -> None:
        self.app_spec, self.table_name, self.schema = app_spec, table_name, schema

    def __call__(self, batches: Any) -> Any:
        import pyarrow as pa

        from .apps import load_app

        table = load_app(self.app_spec).tables[self.table_name]
        arrow = rows.arrow_schema(self.schema)
        typed = [table.key_type is not None, table.value_type is not None]
        for batch in batches:
            cols = batch.to_pydict()
            keys = [rows.to_plain(table.key_codec.decode(k)) if typed[0] else (k or b"").decode("utf-8", "replace")
                    for k in cols["key"]]
            values = [rows.to_plain(table.value_codec.decode(v)) if typed[1] else v.decode("utf-8", "replace")
                      for v in cols["value"]]
            yield pa.RecordBatch.from_arrays([pa.array(keys, arrow.field("key").type),
                                              pa.array(values, arrow.field("value").type)], schema=arrow)
