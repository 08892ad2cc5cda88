"""The Topology: what a worker reads, writes and keeps, frozen once before it subscribes.

An App is a registry of declarations; agents declare their ``group_by``/``through`` topics when
their bodies first run. The worker starts the agents, waits until every stream has started
iterating, and then freezes what it found into this immutable description: sources, sinks,
repartition topics, tables with their changelogs, and the co-partition group (the source
topics, which must share one partition count, and the tables that take it). After that nothing
is created or subscribed; an agent that tries is refused with the reason.

``streamkit topology -A module:app`` prints it (``--format mermaid`` for a picture), in the
spirit of Kafka Streams' ``Topology.describe()``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .types.app import AppProtocol


@dataclass(frozen=True)
class AgentNode:
    name: str
    source: str
    reads: tuple[str, ...]  # its source plus the repartition/through topics it re-reads
    writes: tuple[str, ...]  # sinks, and the repartition/through topics it forwards to


@dataclass(frozen=True)
class TableNode:
    name: str
    partitions: int
    changelog: str
    store: str
    is_global: bool


@dataclass(frozen=True)
class Topology:
    app_id: str
    agents: tuple[AgentNode, ...]
    tables: tuple[TableNode, ...]
    partitions: dict[str, int] = field(hash=False)  # every topic the worker uses → its count
    copartitioned: tuple[str, ...]  # the source topics: one partition count, shared with the tables
    internal: tuple[str, ...]  # leader, replies, cluster, dead letters
    timers: tuple[str, ...]
    pages: tuple[str, ...]
    joins: tuple[str, ...] = ()  # each join, described (streamkit/joins)
    table_joins: tuple[tuple[str, str, str], ...] = ()  # (left, right, joined) table names
    join_reads: tuple[tuple[str, str], ...] = ()  # (table, agent): the agent's records join the table

    @property
    def subscribed(self) -> list[str]:
        """What the worker's consumer group reads: every agent's topics."""
        return sorted({t for a in self.agents for t in a.reads})

    def describe(self) -> str:
        """Plain text, one block per part (stable order: usable in tests and diffs)."""
        count = self.partitions.get
        lines = [f"Topology of app {self.app_id!r}"]
        if self.copartitioned:
            lines.append(f"  co-partitioned ({count(self.copartitioned[0], '?')} partitions): "
                         + ", ".join(self.copartitioned))
        for agent in self.agents:
            lines.append(f"  agent {agent.name}")
            for topic in agent.reads:
                lines.append(f"    reads  {topic} [{count(topic, '?')}]")
            for topic in agent.writes:
                lines.append(f"    writes {topic} [{count(topic, '?')}]")
        for table in self.tables:
            kind = "global table" if table.is_global else "table"
            lines.append(f"  {kind} {table.name} [{table.partitions}] store {table.store} "
                         f"changelog {table.changelog}")
        for join in self.joins:
            lines.append(f"  {join}")
        for name in self.timers:
            lines.append(f"  timer {name}")
        for path in self.pages:
            lines.append(f"  page {path}")
        lines.append("  internal " + ", ".join(self.internal))
        return "\n".join(lines)

    def mermaid(self) -> str:
        """A ``flowchart LR`` for Markdown: topics as stadiums, agents as boxes, tables as cylinders."""
        ids: dict[str, str] = {}

        def node(name: str, shape: tuple[str, str]) -> str:
            if name not in ids:
                ids[name] = f"n{len(ids)}"
                label = name.replace('"', "'")
                out.append(f'  {ids[name]}{shape[0]}"{label}"{shape[1]}')
            return ids[name]

        out = ["flowchart LR"]
        for agent in self.agents:
            a = node(f"agent {agent.name}", ("[", "]"))
            for topic in agent.reads:
                out.append(f"  {node(topic, ('([', '])'))} --> {a}")
            for topic in agent.writes:
                out.append(f"  {a} --> {node(topic, ('([', '])'))}")
        for table in self.tables:
            t = node(f"table {table.name}", ("[(", ")]"))
            out.append(f"  {t} -.-> {node(table.changelog, ('([', '])'))}")
        for left, right, joined in self.table_joins:
            j = node(f"table {joined}", ("[(", ")]"))
            for side in (left, right):
                out.append(f"  {node(f'table {side}', ('[(', ')]'))} -- join --> {j}")
        for table_name, agent_name in self.join_reads:
            out.append(f"  {node(f'table {table_name}', ('[(', ')]'))} -- join --> "
                       f"{node(f'agent {agent_name}', ('[', ']'))}")
        return "\n".join(out)


def build_topology(app: "AppProtocol", subscribed: Iterable[str], partitions: dict[str, int]) -> Topology:
    """Freeze ``app``'s declarations as its running worker sees them: ``subscribed`` are the topics
    its agents read (group_by and through topics included), ``partitions`` each topic's count."""
    subscribed = set(subscribed)
    agents = []
    for agent in app.agents.values():
        own = sorted(agent.internal_topics())
        reads = [*(m.name for m in agent.topic.members), *(t for t in own if t in subscribed)]
        writes = [*own, *(sink.name if hasattr(sink, "name") else str(sink) for sink in agent.sinks)]
        agents.append(AgentNode(agent.name, agent.topic.name, tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))))
    tables = tuple(
        TableNode(t.name, t.partitions, t.changelog.name, t.store_url, t.is_global) for t in app.tables.values()
    )
    internal = (app.leader_topic.name, app.reply_topic.name, app.cluster_topic.name, app.dlq_topic_name)
    return Topology(
        app_id=app.id,
        agents=tuple(agents),
        tables=tables,
        partitions=dict(partitions),
        copartitioned=tuple(app.copartition_group(subscribed)),
        internal=internal,
        timers=tuple(t.name for t in app.timers),
        pages=tuple(path for path, _ in app.pages),
        joins=tuple(join.describe() for join in app.joins),
        table_joins=tuple((j.left.name, j.right.name, j.name) for j in app.joins if not j.streams),
        join_reads=tuple(dict.fromkeys(_join_reads(app))),
    )


def _join_reads(app: "AppProtocol") -> Iterable[tuple[str, str]]:
    """(table, agent) for each stream-table join (its table) and windowed join (its buffer)."""
    agent_reading = {id(agent.topic): agent.name for agent in app.agents.values()}
    for join in app.joins:
        if not join.streams:
            continue  # a table-table join: table_joins
        agent = getattr(join, "agent", None) or agent_reading.get(id(join))
        if agent is not None:
            yield join.table.name, agent
