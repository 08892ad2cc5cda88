"""``App``: where topics, agents and timers are declared, and the handle that runs them."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, AsyncIterator, Callable, Iterable

from .agents.agent import Agent
from .agents.naming import default_topic_name, warn_of_old_agent_topics
from .agents.replies import Replies
from .background import Background, LeaderFlag
from .errors import ConfigurationError, exception_types, refuse_faust_options
from .faust.app_settings import apply_faust_app_settings
from .runtime.context import ProcessingContext
from .runtime.topic_creation import TopicsOnFirstSend
from .scheduled_sends import ScheduledSends
from .sensors import Monitor, SensorDelegate
from .settings import Settings
from .signals import Signal
from .tables.rocks_options import RocksTuning
from .timers import Clock, Timer, Timers
from .topics import Topic
from .transport import Driver, Producer, create_driver

log = logging.getLogger("streamkit.app")


class App:
    """A stream-processing application: ``app = streamkit.App("orders", broker="kafka://...")``.

    The id names the consumer group and prefixes every internal topic. Any ``Settings`` field
    can be passed as a keyword and overridden by ``STREAMKIT_<FIELD>`` in the environment.
    """

    def __init__(self, id: str, *, clock: Clock | None = None, **settings: Any) -> None:
        if not id or any(c.isspace() for c in id):
            raise ConfigurationError(f"app id {id!r} must be non-empty without spaces")
        self.conf = Settings.from_env(**settings)
        RocksTuning.from_settings(self.conf.rocksdb_options)  # refused now, not at the first store
        self._given_id = id
        self.id = self._versioned_id()
        self.clock = clock or Clock()
        self.topics: dict[str, Topic] = {}
        self.agents: dict[str, Agent] = {}
        self.timers: list[Timer] = []
        self.tables: dict[str, Any] = {}
        self.pages: list[tuple[str, Any]] = []
        self.joins: list[Any] = []  # joins declared (streamkit/joins): the topology shows and checks them
        self.commands: dict[str, Any] = {}  # @app.command: click commands (cli/app_commands.py)
        self.replies = Replies(self)
        self.background = Background()  # @app.task, @app.service
        # Faust's signals: @app.on_partitions_assigned.connect async def fn(app, assigned): ...
        self.on_partitions_assigned = Signal("on_partitions_assigned", self)
        self.on_partitions_revoked = Signal("on_partitions_revoked", self)
        self.on_rebalance_complete = Signal("on_rebalance_complete", self)
        self.on_worker_init = Signal("on_worker_init", self)
        self.on_before_shutdown = Signal("on_before_shutdown", self)
        # Faust's configuration signals: receivers may still change app.conf; they run once,
        # before a worker or a command first uses the settings (configure())
        self.on_before_configured = Signal("on_before_configured", self)
        self.on_configured = Signal("on_configured", self)
        self.on_after_configured = Signal("on_after_configured", self)
        self._configured = False
        self.sensors = SensorDelegate()  # Faust's app.sensors.add(sensor) (sensors.py)
        # what topics, tables and joins use of the running worker (runtime/context.py): handed to
        # each as it is made, bound to each worker from its start until it has stopped
        self.processing = ProcessingContext()
        self.runtime: Any = None
        self._timers: Timers | None = None
        self._driver: Driver | None = None
        self._client_producer: Producer | None = None
        self._producer_lock: asyncio.Lock | None = None
        self.topic_creation = TopicsOnFirstSend(self)  # a topic first sent to later is created first
        self.scheduled_sends = ScheduledSends()  # topic.send_soon() without await (scheduled_sends.py)
        self.leader_topic = Topic(self, f"{self.id}-__leader", partitions=1, internal=True)
        self.reply_topic = Topic(self, f"{self.id}-replies", partitions=1, internal=True)
        self.cluster_topic = Topic(self, f"{self.id}-__cluster", partitions=1, internal=True,
                                   config={"cleanup.policy": "compact"})  # keyed by worker URL
        self.web: Any = None
        self.spark_spec: str | None = None  # module:attribute for Spark tasks (found when unset)
        self._spark: Any = None

    def _versioned_id(self) -> str:
        """Faust's: above version 1 the id is ``id_format`` (``<id>-v<version>``)."""
        conf = self.conf
        if conf.version <= 1:
            return self._given_id
        try:
            return conf.id_format.format(id=self._given_id, self=conf)
        except (AttributeError, KeyError, IndexError) as exc:
            raise ConfigurationError(f"id_format={conf.id_format!r}: {exc!r}; use {{id}} and {{self.<setting>}}") from None

    @property
    def dlq_topic_name(self) -> str:
        return self.conf.dlq_topic or f"{self.id}-dlq"

    def __repr__(self) -> str:
        return f"<App {self.id!r} broker={self.conf.broker} driver={self.conf.driver}>"

    # -- declarations ---------------------------------------------------------------------------

    def topic(self, name: str = "", *more: str, key_type: Any = None, value_type: Any = None, partitions: int | None = None,
              replicas: int | None = None, config: dict[str, str] | None = None, key_serializer: Any = None,
              value_serializer: Any = None, internal: bool = False, pattern: Any = None) -> Topic:
        """Declare a topic; it is created at worker start if missing (and checked if present).
        Several names (Faust's ``app.topic("a", "b")``) give one agent input over all of them."""
        if pattern is not None:  # topic_patterns.py: the matching topics are found when the worker starts
            from .topic_patterns import pattern_topic

            def member(topic_name: str) -> Topic:
                return self.topic(topic_name, key_type=key_type, value_type=value_type,
                                  key_serializer=key_serializer, value_serializer=value_serializer)

            return pattern_topic(self, name, pattern, member, partitions=partitions, replicas=replicas,
                                 config=config)
        if not name:
            raise ConfigurationError("app.topic() needs a topic name")
        if more:
            from .topics import TopicGroup

            members = [self.topic(n, key_type=key_type, value_type=value_type, partitions=partitions,
                                  replicas=replicas, config=config, key_serializer=key_serializer,
                                  value_serializer=value_serializer, internal=internal) for n in (name, *more)]
            return TopicGroup(self, members)
        if name in self.topics:
            existing = self.topics[name]
            if partitions is not None and existing.partitions not in (None, partitions):
                raise ConfigurationError(f"topic {name!r} declared twice with different partition counts")
            return existing
        if key_type is None and key_serializer is None and self.conf.key_serializer != "raw" and not internal:
            key_serializer = self.conf.key_serializer  # Faust's app-wide default
        if value_type is None and value_serializer is None and self.conf.value_serializer != "json" and not internal:
            value_serializer = self.conf.value_serializer
        if value_type is str and value_serializer is None and self.conf.value_serializer == "json" and not internal:
            value_serializer = "json"  # Faust's default: a str value is a JSON string (value_serializer="raw": bytes)
        topic = Topic(self, name, key_type=key_type, value_type=value_type, partitions=partitions, replicas=replicas,
                      config=config, key_serializer=key_serializer, value_serializer=value_serializer, internal=internal)
        self.topics[name] = topic
        return topic

    def command(self, *options: Any, name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Faust's ``@app.command(option(...))``: ``async def fn(self, **options)`` as a CLI command
        of this app (``python app.py fn``, ``streamkit -A app fn``; cli/app_commands.py)."""
        return _runner("command")(self, options, name)

    def channel(self, *, name: str | None = None, key_type: Any = None, value_type: Any = None,
                maxsize: int | None = None) -> Any:
        """Faust's in-process channel: an agent input that never goes through Kafka (channels.py)."""
        from .channels import Channel

        return Channel(self, name=name, key_type=key_type, value_type=value_type, maxsize=maxsize)

    def stream(self, channel: Any, **kwargs: Any) -> Any:
        """Faust's ``app.stream(iterable)``: a stream over the values of a (sync or async)
        iterable, with the stream operators (``filter``, ``map``, ``enumerate``, ``echo``).
        A topic or channel is read by an agent, which commits what it processed."""
        from .streams.stream import Derived

        if isinstance(channel, (Topic, str)) or getattr(channel, "is_channel", False):
            raise ConfigurationError(f"app.stream({getattr(channel, 'name', channel)!r}): a topic or channel is read "
                                     "by an agent here (@app.agent(topic)), which commits its offsets; app.stream "
                                     "takes an iterable")
        if kwargs:
            raise ConfigurationError(f"app.stream(iterable, {', '.join(kwargs)}=...): options are for topic streams, "
                                     "which agents read here")

        async def values() -> AsyncIterator[Any]:
            if hasattr(channel, "__aiter__"):
                async for value in channel:
                    yield value
            else:
                for value in channel:
                    yield value

        return Derived(None, values())

    def agent(self, channel: Topic | str | None = None, *, name: str | None = None, concurrency: int = 1,
              sink: Iterable[Any] | None = None, key_type: Any = None, value_type: Any = None,
              isolated_partitions: bool = False, supervisor_strategy: Any = None, use_reply_headers: bool = True,
              no_retry: Any = (), columnar: bool = False, _fold: Any = None) -> Callable[[Callable[..., Any]], Agent]:
        """Decorate ``async def fn(stream)`` (a coroutine or an async generator) as an agent, or a
        plain ``def fn(value)`` whose result (unless None) goes to the sinks. ``columnar=True``:
        ``def fn(batch)`` over a pyarrow RecordBatch of each fetched batch (the topic's Record
        fields, key, timestamp, partition, offset), returning the output rows (agents/columnar.py).

        Without a channel the agent gets its own topic, named as Faust names it:
        ``<app-id>-<module>.<function>`` (``<app-id>-<name>`` with ``name=``), typed by ``key_type``
        and ``value_type`` as in Faust (``@app.agent(value_type=str)``). ``no_retry``: exception
        types whose records go to the error policy at once (with the ``agent_no_retry`` setting's).
        """
        no_retry = exception_types("@app.agent(no_retry=...)", no_retry)  # refused before the function is given
        if isolated_partitions:
            raise ConfigurationError("@app.agent(isolated_partitions=True) is not supported: one stream per agent "
                                     "instance reads its partitions, each in order; keep per-partition state in a "
                                     "table (co-partitioned with the topic), or use concurrency=")
        if supervisor_strategy is not None:
            raise ConfigurationError("@app.agent(supervisor_strategy=...) is not supported: a failing agent is "
                                     "restarted alone, agent_retries times per record, then the error policy applies")
        if not use_reply_headers:
            raise ConfigurationError("@app.agent(use_reply_headers=False) is not supported: ask() replies are routed "
                                     "by headers")
        if channel is not None and (key_type is not None or value_type is not None):
            raise ConfigurationError("@app.agent(channel, key_type=/value_type=): the types belong to the channel; "
                                     "declare them on app.topic(...) (or leave the channel out)")
        fold = _fold

        def decorate(fun: Callable[..., Any]) -> Agent:
            agent_name = name or fun.__name__
            if agent_name in self.agents:
                raise ConfigurationError(f"agent {agent_name!r} is defined twice")
            if channel is None:  # Faust's name: <id>-<module>.<function> (agents/naming.py)
                topic = self.topic(default_topic_name(self.id, fun, name), key_type=key_type, value_type=value_type)
            elif isinstance(channel, str):
                topic = self.topic(channel)
            else:
                topic = channel
            agent = Agent(self, fun, topic, name=agent_name, concurrency=concurrency, sink=sink, fold=fold,
                          no_retry=no_retry, columnar=columnar)
            agent.default_topic = channel is None
            self.agents[agent_name] = agent
            return agent

        return decorate

    def fold(self, channel: Topic | str, *, table: Any, name: str | None = None,
             sink: Iterable[Any] | None = None) -> Callable[[Callable[..., Any]], Agent]:
        """Decorate ``def fn(state, value) -> (state, outputs)``: a keyed fold whose state per
        record key lives in ``table``; outputs go to ``sink`` under the record's key. The same
        definition runs in the worker and on Spark (``app.spark.run``)."""
        from .agents.fold import Fold

        def decorate(fun: Callable[..., Any]) -> Agent:
            return self.agent(channel, name=name or fun.__name__, sink=sink, _fold=Fold(fun, table))(fun)

        return decorate

    def Table(self, name: str, *, default: Callable[[], Any] | None = None, key_type: Any = None,
              value_type: Any = None, partitions: int | None = None, store: str | None = None,
              help: str = "", on_window_close: Callable[[Any, Any], Any] | None = None, history: Any = None,
              changelog_topic: Topic | None = None, key_partitioning: str = "task", **faust_only: Any) -> Any:
        """A changelog-backed dict, co-partitioned with the topics whose records write to it;
        ``.tumbling(size)``/``.hopping(size, step)`` make it windowed (tables/windows.py);
        ``history=`` (a duration) keeps past values for ``as_of`` reads and joins (joins/versioned.py);
        ``changelog_topic=`` (Faust's): a topic the app declared is the changelog (tables/declared_changelog.py);
        ``key_partitioning``: where a key written from another partition's record lives
        (tables/task_keys.py: ``"task"``, that record's partition; ``"strict"``: refused)."""
        from .tables.table import Table
        from .tables.task_keys import check_key_partitioning

        check_key_partitioning(name, key_partitioning)

        refuse_faust_options("app.Table", faust_only, _FAUST_TABLE_OPTIONS, ConfigurationError, repr(name))
        if history is not None:
            if changelog_topic is not None:
                raise ConfigurationError(f"app.Table({name!r}, history=..., changelog_topic=...): a history table's "
                                         "changelog holds past values in streamkit's own format, which the topic's "
                                         "readers would not read; leave out changelog_topic")
            from functools import partial

            from .joins.versioned import VersionedTable

            table = self._add_table(partial(VersionedTable, history=history), name, default, key_type, value_type,
                                    partitions, store, help)
            table.on_window_close, table.key_partitioning = on_window_close, key_partitioning
            return table
        table = self._add_table(Table, name, default, key_type, value_type, partitions, store, help,
                                changelog_topic)
        table.on_window_close, table.key_partitioning = on_window_close, key_partitioning
        return table

    # joins/ builds on topics, streams and tables, so their join() methods come here, where the
    # layers are wired together (an import from below would invert the layers)
    def join_topics(self, left: Any, right: Any, **options: Any) -> Any:
        """``topic.join(other, within=...)``: a windowed stream-stream join (joins/windowed.py)."""
        from .joins import windowed_join

        return windowed_join(left, right, **options)

    def join_tables(self, left: Any, right: Any, **options: Any) -> Any:
        """``table.join(other)``: a joined, materialised table (joins/tables.py)."""
        from .joins import table_join

        return table_join(left, right, **options)

    def join_stream(self, stream: Any, table: Any, **options: Any) -> Any:
        """``stream.join(table)``: a stream-table lookup join (joins/lookup.py)."""
        from .joins import stream_table_join

        return stream_table_join(stream, table, **options)

    def GlobalTable(self, name: str, *, default: Callable[[], Any] | None = None, key_type: Any = None,
                    value_type: Any = None, partitions: int | None = None, store: str | None = None,
                    help: str = "", changelog_topic: Topic | None = None, **faust_only: Any) -> Any:
        """A table every worker holds in full, kept current from its changelog."""
        from .tables.table import GlobalTable

        refuse_faust_options("app.Table", faust_only, _FAUST_TABLE_OPTIONS, ConfigurationError, repr(name))
        return self._add_table(GlobalTable, name, default, key_type, value_type, partitions, store, help,
                               changelog_topic)

    def _add_table(self, cls: Any, name: str, default: Any, key_type: Any, value_type: Any, partitions: Any,
                   store: Any, help: str, changelog_topic: Topic | None = None) -> Any:
        if name in self.tables:
            raise ConfigurationError(f"table {name!r} is defined twice")
        more = {"changelog_topic": changelog_topic} if changelog_topic is not None else {}
        table = cls(self, name, default=default, key_type=key_type, value_type=value_type, partitions=partitions,
                    store=store, help=help, **more)
        self.tables[name] = table
        return table

    def page(self, path: str) -> Callable[[Any], Any]:
        """Serve ``async def view(web, request, **match_info)`` at ``path`` on every worker."""

        def decorate(view: Any) -> Any:
            self.pages.append((path, view))
            return view

        return decorate

    def table_route(self, *, table: Any, match_info: str | None = None,
                    query_param: str | None = None) -> Callable[[Any], Any]:
        """Answer on the worker that owns the key's table partition, forwarding if needed."""
        from .web.routing import table_route

        return table_route(self, table, match_info=match_info, query_param=query_param)

    def topic_route(self, topic: Topic, shard_param: str | None = None, *, query_param: str | None = None,
                    match_info: str | None = None, exact_key: str | None = None) -> Callable[[Any], Any]:
        """Faust's: answer on the worker assigned the key's partition of ``topic``, forwarding if
        needed (``shard_param`` is Faust's deprecated name for ``query_param``)."""
        from .web.routing import topic_route

        if shard_param is not None and query_param is not None:
            raise ConfigurationError("topic_route takes query_param= or Faust's deprecated shard_param, not both")
        return topic_route(self, topic, match_info=match_info, query_param=query_param or shard_param,
                           exact_key=exact_key)

    def timer(self, interval: float, *, on_leader: bool = False, name: str | None = None) -> Callable[[Any], Any]:
        """Run ``async def fn()`` every ``interval`` seconds while the worker runs."""

        def decorate(fun: Any) -> Any:
            self.timers.append(Timer(fun, interval=interval, on_leader=on_leader, name=name))
            return fun

        return decorate

    def crontab(self, cron: str, *, timezone: Any = None, on_leader: bool = False, name: str | None = None,
                tz: Any = None) -> Callable[[Any], Any]:
        """Run ``async def fn()`` on a cron schedule (croniter syntax, UTC unless ``timezone``;
        Faust's ``tz=`` is the same)."""
        if tz is not None and timezone is not None:
            raise ConfigurationError("crontab takes timezone= or Faust's tz=, not both")
        timezone = timezone if timezone is not None else tz

        def decorate(fun: Any) -> Any:
            self.timers.append(Timer(fun, cron=cron, timezone=timezone, on_leader=on_leader, name=name))
            return fun

        return decorate

    def task(self, fun: Any = None, *, on_leader: bool = False) -> Any:
        """``@app.task``: run ``async def fn()`` (or ``fn(app)``) once when the worker has started;
        ``on_leader=True``: on the leader only. Exceptions are logged, never fatal."""

        def decorate(f: Any) -> Any:
            self.background.tasks.append((f, on_leader))
            return f

        return decorate(fun) if fun is not None else decorate

    def service(self, service: Any) -> Any:
        """``@app.service``: a mode ``Service`` (class or instance) started and stopped with the worker."""
        self.background.services.append(service)
        return service

    @property
    def monitor(self) -> Monitor:
        """Faust's ``app.monitor``: the Monitor sensor (added on first use; /stats serves it)."""
        for sensor in self.sensors:
            if isinstance(sensor, Monitor):
                return sensor
        monitor = Monitor()
        self.sensors.add(monitor)
        return monitor

    @property
    def rebalancing(self) -> bool:
        """Faust's ``app.rebalancing``: True from a revocation or assignment until it completed."""
        return bool(self.runtime is not None and self.runtime.rebalancing)

    def finalize(self) -> None:
        """Faust's ``app.finalize()`` (called by Faust's test fixtures): checks the settings as
        they stand; streamkit has nothing else to finalize before the worker starts."""
        self.conf.validate()

    @property
    def flow_control(self) -> "FlowControl":
        """Faust's ``app.flow_control``: test fixtures call ``resume()``; records always flow
        here except while the runtime itself pauses partitions (rebalance, recovery)."""
        return FlowControl()

    def SetTable(self, name: str, *, start_manager: bool = False, **options: Any) -> Any:
        """Faust's SetTable: a table whose values are sets (``table[k].add(v)``, ``.discard(v)``)."""
        if start_manager:
            raise ConfigurationError("SetTable(start_manager=True) (writes to any key from any worker through a "
                                     "manager agent) is not supported: write from the agent that owns the key, "
                                     "or group_by the stream to it")
        from .tables.sets import store_sets

        return store_sets(self.Table(name, default=set, **options))  # value_type: the elements' (tables/sets.py)

    def SetGlobalTable(self, name: str, *, start_manager: bool = False, **options: Any) -> Any:
        """Faust's SetGlobalTable: a GlobalTable whose values are sets."""
        if start_manager:
            raise ConfigurationError("SetGlobalTable(start_manager=True) is not supported: see SetTable")
        from .tables.sets import store_sets

        return store_sets(self.GlobalTable(name, default=set, **options))

    def all_topics(self) -> list[Topic]:
        """Every topic the worker needs: declared, agents', internal (DLQ, leader, replies), and
        the changelogs of tables whose partition count is settled (see ``resolve_tables``)."""
        topics = dict(self.topics)
        for agent in self.agents.values():
            if not getattr(agent.topic, "is_channel", False):  # a channel stays in process
                for member in agent.topic.members:
                    topics.setdefault(member.name, member)
        for table in self.tables.values():
            if table.resolved:
                topics[table.changelog.name] = table.changelog
            else:
                topics.pop(table.changelog.name, None)
        for topic in (self.leader_topic, self.reply_topic, self.cluster_topic):
            topics[topic.name] = topic
        late_letters = any(t.window is not None and t.window.late == "dead-letter" for t in self.tables.values())
        if (self.conf.error_policy == "dlq" or late_letters) and self.dlq_topic_name not in topics:
            topics[self.dlq_topic_name] = Topic(self, self.dlq_topic_name, internal=True)
        return list(topics.values())

    async def ensure_topics(self) -> dict[str, int]:
        """Create missing topics and check existing ones (bounded retry if the broker is down);
        returns each topic's partition count as the broker reports it."""
        from .runtime.topic_admin import ensure_topics

        topics = self.all_topics()
        specs = [t.spec(self.conf.topic_partitions, self.conf.topic_replicas) for t in topics]
        declared = {t.name: t.partitions for t in topics}
        described = await ensure_topics(self.driver, self.conf.bootstrap_servers, specs, declared,
                                        self.conf.broker_connect_timeout, self.derived_topics(declared))
        self.topic_creation.exist(described)
        return {name: info.partitions for name, info in described.items()}

    def derived_topics(self, names: Iterable[str]) -> list[str]:
        """The topics whose content the app derived from its input, which ``streamkit reset``
        deletes: its tables' changelogs, its leader, reply and cluster topics, and the group_by
        repartition topics among ``names``. Not a topic the app declared as a table's changelog
        (``changelog_topic=``): others may read it, and it is no more internal than any declared topic."""
        own = {self.leader_topic.name, self.reply_topic.name, self.cluster_topic.name}
        own.update(table.changelog.name for table in self.tables.values() if not table.changelog_declared)
        own.update(n for n in names if n.startswith(f"{self.id}-") and n.endswith("-repartition"))
        return sorted(own)

    def copartition_group(self, subscribed: Iterable[str]) -> list[str]:
        """The source topics among ``subscribed`` (what agents read, group_by and through
        topics included): not the app's own leader, reply, cluster and dead-letter topics, nor
        changelogs."""
        own = {self.leader_topic.name, self.reply_topic.name, self.cluster_topic.name, self.dlq_topic_name}
        own.update(table.changelog.name for table in self.tables.values())
        return sorted(set(subscribed) - own)

    async def resolve_patterns(self, *, planning: bool) -> None:
        """Give each ``app.topic(pattern=...)`` the topics matching it on the broker now
        (topic_patterns.py; the runtime sits below topics, so the app wires it in)."""
        from .topic_patterns import resolve_patterns

        await resolve_patterns(self, planning=planning)

    async def resolve_tables(self, subscribed: Iterable[str], counts: dict[str, int]) -> dict[str, int]:
        """Settle every table's partition count, then create or check the changelogs (warning of
        uncompacted declared changelogs and old agent topics); returns each topic's partition
        count as the broker reports it.

        The worker calls this once at start, after agents declared their group_by topics and
        before it first subscribes. ``subscribed``: the topics agents read; ``counts``: their
        partition counts on the broker. A table without ``partitions=`` takes the count its
        sources agree on; sources that disagree, or a declared count none of them has, raise a
        ConfigurationError saying what to change (``tables.table.resolve_partitions``).
        """
        from .joins.checks import check_joins, check_table_joins
        from .tables.declared_changelog import warn_if_not_compacted
        from .tables.table import resolve_partitions

        check_joins(self.joins, {name: counts.get(name) or (self.topics[name].partitions if name in self.topics else None)
                                 or self.conf.topic_partitions for j in self.joins for name in j.streams})
        sources = {}
        for name in self.copartition_group(subscribed):
            topic = self.topics.get(name)
            sources[name] = counts.get(name) or (topic.partitions if topic is not None else None) \
                or self.conf.topic_partitions
        resolve_partitions(self.tables.values(), sources)
        check_table_joins(self.joins)
        for table in self.tables.values():
            if table.declared_partitions is None and not table.is_global:
                log.info("table %r has %d partitions, as its source topics (%s)", table.name, table.partitions,
                         ", ".join(sources) or "none: topic_partitions")
        counts = await self.ensure_topics()
        await warn_if_not_compacted(self)  # a declared changelog_topic= made elsewhere without compaction
        if not getattr(self.runtime, "planning", False):
            await warn_of_old_agent_topics(self)  # agents took Faust's topic names (agents/naming.py)
        return counts

    # -- clients --------------------------------------------------------------------------------

    @property
    def driver(self) -> Driver:
        if self.runtime is not None:
            return self.runtime.driver
        if self._driver is None:
            self._driver = create_driver(self.conf)
        return self._driver

    async def producer(self) -> Producer:
        """The worker's producer when running, else a client producer started on first use."""
        if self.runtime is not None:
            return self.runtime.producer
        if self._client_producer is None:
            if self._producer_lock is None:
                self._producer_lock = asyncio.Lock()
            async with self._producer_lock:
                if self._client_producer is None:
                    from .runtime.host_names import check_host_names

                    await check_host_names(self.driver.name, self.conf.bootstrap_servers)  # a typo: one line now
                    producer = self.driver.producer()
                    await producer.start()
                    self._client_producer = producer
        return self._client_producer

    async def send(self, channel: Any, key: Any = None, value: Any = None, *, partition: int | None = None,
                   timestamp: float | None = None, headers: Any = None) -> asyncio.Future:
        """Faust's ``app.send(channel, key=, value=)``: ``channel`` is a topic, a channel, or a topic name."""
        target = self.topic(channel) if isinstance(channel, str) else channel
        return await target.send(key=key, value=value, partition=partition, timestamp=timestamp, headers=headers)

    async def send_raw(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                       timestamp: int | None = None, partition: int | None = None,
                       track: bool = True) -> asyncio.Future | None:
        if topic not in self.topic_creation.known:  # first sent to: created with the app's settings
            await self.topic_creation.ensure(topic)
        producer = await self.producer()
        return await producer.send(topic, key, value, headers=headers, timestamp=timestamp, partition=partition,
                                   track=track)

    async def flush(self) -> None:
        await (await self.producer()).flush()

    @property
    def spark(self) -> Any:
        """Run this app's agents and read its topics and tables on Spark (``streamkit[spark]``)."""
        if self._spark is None:
            self._spark = _runner("spark")(self)  # spark/facade.py's SparkFacade
        return self._spark

    @property
    def is_leader(self) -> LeaderFlag:
        """Truthy on the worker that owns the leader partition; also callable (Faust's ``app.is_leader()``)."""
        return LeaderFlag(bool(self.runtime is not None and self.runtime.is_leader))

    # -- running --------------------------------------------------------------------------------

    async def configure(self) -> None:
        """Send Faust's ``on_before_configured``, ``on_configured(conf=)`` and
        ``on_after_configured`` once, before the settings are first used (a worker or a command
        starting): receivers may set ``app.conf.<setting>`` as in Faust."""
        if self._configured:
            return
        self._configured = True
        await self.on_before_configured.send()
        await self.on_configured.send(conf=self.conf)
        await self.on_after_configured.send()

    async def start(self) -> None:
        """Start a worker in this process (the CLI's ``worker`` command calls this)."""
        from .runtime.worker import Runtime
        from .tables.manager import TableManager

        if self.runtime is not None:
            raise RuntimeError("app is already running")
        await self.configure()
        if self._versioned_id() != self.id:
            raise ConfigurationError(f"version/id_format changed after App({self._given_id!r}) named its topics "
                                     f"{self.id!r}: pass version= (and id_format=) to App(...)")
        self.conf.freeze()
        apply_faust_app_settings(self)
        await self.on_worker_init.send()
        listeners = self._bind_web()  # before the group is joined: a taken port rebalances no one
        self.runtime = Runtime(self, table_manager=TableManager)
        self.processing.bind(self.runtime)
        try:
            await self.runtime.start()
        except BaseException:
            if listeners is not None:
                listeners.close()
            runtime, self.runtime = self.runtime, None
            with contextlib.suppress(Exception):
                await runtime.stop()
            self.processing.unbind(runtime)
            self.conf.freeze(False)
            raise
        if listeners is not None:
            await self._start_web(listeners)
        self._timers = Timers(self.timers, self.clock, lambda: bool(self.is_leader))
        self._timers.start()
        await self.background.start(self)

    def _bind_web(self) -> Any:
        """The web server's sockets, bound now (web/binding.py); None without web views."""
        if not self.conf.web_enabled:
            return None
        from .web.binding import bind_web

        try:
            return bind_web(self.conf)
        except ConfigurationError:
            self.conf.freeze(False)
            raise

    async def _start_web(self, listeners: Any) -> None:
        from .web.server import WebServer

        web = WebServer(self)
        try:
            await web.start(listeners)
        except BaseException:
            listeners.close()
            await self.stop()
            raise
        self.web = web
        runtime = self.runtime
        runtime.checkpoint.observers.append(web.metrics.commit_seconds.observe)

    async def stop(self) -> None:
        """Graceful stop: finish in-flight records, commit, flush, leave the group."""
        if self.runtime is not None:
            await self.on_before_shutdown.send()
        await self.background.stop()
        if self._timers is not None:
            await self._timers.stop()
            self._timers = None
        await self.replies.stop()
        if self.web is not None:
            web, self.web = self.web, None
            await web.stop()
        if self.runtime is not None:
            runtime, self.runtime = self.runtime, None
            try:
                await runtime.stop()  # its final checkpoint still uses the context
            finally:
                self.processing.unbind(runtime)
            self._last_runtime = runtime
            self.conf.freeze(False)
        if self._client_producer is not None:
            producer, self._client_producer = self._client_producer, None
            await producer.flush()
            await producer.stop()

    async def plan_topology(self) -> Any:
        """The Topology a worker of this app would freeze, without a broker (runtime/planning.py)."""
        from .runtime.planning import plan_topology
        from .tables.manager import TableManager

        return await plan_topology(self, TableManager)

    def main(self, argv: list[str] | None = None) -> None:
        """``if __name__ == "__main__": app.main()`` then ``python app.py worker``, as in Faust."""
        _runner("main")(self, argv)  # cli/main.py's run_app_main

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["App"]:
        """``async with app.running():`` — a worker for the duration of the block."""
        await self.start()
        try:
            yield self
        finally:
            await self.stop()


# The App hands over to what runs it besides its worker: the CLI (``app.main()``,
# ``@app.command``) and Spark (``app.spark``). Those sit above this module and import it, so
# streamkit/runners.py registers them here at ``import streamkit`` rather than this module
# importing them back.
RUNNERS: dict[str, Callable[..., Any]] = {}


def _runner(name: str) -> Callable[..., Any]:
    runner = RUNNERS.get(name)
    if runner is None:
        raise RuntimeError(f"app.{name}: nothing registered to run it; streamkit/runners.py registers the CLI and "
                           "Spark hand-overs when the streamkit package is imported")
    return runner


def import_app(spec: str) -> App:
    """The App named ``module:attribute`` (attribute defaults to ``app``); the current directory
    is importable, like Faust's ``-A``. Raises ConfigurationError saying what is wrong."""
    import importlib
    import os
    import sys

    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise ConfigurationError(f"an app is named as module:attribute, not {spec!r}")
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        raise ConfigurationError(_module_form(module_name, attr))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from None
    app = getattr(module, attr or "app", None)
    if not isinstance(app, App):
        raise ConfigurationError(f"{spec!r} is not a streamkit App")
    return app


def _module_form(path: str, attr: str) -> str:
    """-A names a module, as Faust's does (a file path is not imported): the form to use instead."""
    import os

    folder, file = os.path.split(path)
    module = file[:-3] if file.endswith(".py") else file
    where = f", run from {folder}" if folder not in ("", ".") else ""
    return (f"-A takes a module, not a file: for {path + (':' + attr if attr else '')!r} use "
            f"-A {module}:{attr or 'app'}{where}")


_FAUST_TABLE_OPTIONS = {
    "use_partitioner": "a key written from another partition's record is kept in that record's partition "
                       "(Faust's default); to keep every key in its own partition re-key the stream with group_by "
                       "(key_partitioning='strict' refuses the other writes), or use app.GlobalTable",
    "is_global": "declare it with app.GlobalTable(...)",
    "window": "make it windowed with .tumbling(size)/.hopping(size, step)/.session(gap)/.sliding(size)",
    "extra_topic_configs": "create the changelog topic yourself with its configs before the first start",
    "recovery_buffer_size": "recovery applies the changelog in the driver's fetch batches",
    "standby_buffer_size": "standbys apply the changelog in the driver's fetch batches",
    "recover_callbacks": "use app.on_partitions_assigned (recovery is complete when /ready answers 200)",
}


class FlowControl:
    """Faust's flow-control switch, as far as streamkit has one: always on."""

    def resume(self) -> None:
        """Records already flow; nothing to resume."""

    def is_active(self) -> bool:
        return True

    def suspend(self) -> None:
        raise ConfigurationError("app.flow_control.suspend() is not supported: streamkit pauses partitions itself "
                                 "during rebalances and recovery; to stop consuming, stop the agent or the worker")

    def clear(self) -> None:
        self.suspend()
