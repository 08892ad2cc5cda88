"""The Kafka ACLs a worker of an app needs, derived from what its clients do.

A worker's group consumer reads the sources, the repartition/through topics it forwards to and
the leader topic, and commits as the group ``<app-id>``; group-less consumers read the table
changelogs (recovery, standbys, global tables; librdkafka's on both drivers unless aiokafka's
``consumer_config`` is set), the cluster topic (membership) and the replies topic; producers
write the sinks, repartition topics, changelogs, cluster, replies and dead-letter topics; the
admin client describes and creates every one of them at start.
Exactly-once adds the transactional ids (``<app-id>-`` prefixed, or ``transactional_id``).
``streamkit acls`` prints them as ``kafka-acls.sh`` lines (docs/security.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from ..transport.aiokafka_driver import reads_changelogs_with_librdkafka

if TYPE_CHECKING:
    from ..app import App
    from ..topology import Topology


@dataclass(frozen=True)
class Acl:
    """One allow rule: ``operations`` on a resource (``topic``, ``group``, ``transactional-id``
    or ``cluster``), literal or prefixed."""

    resource: str
    name: str
    operations: tuple[str, ...]
    prefixed: bool = False
    why: str = ""


def app_acls(app: "App", topology: "Topology") -> list[Acl]:
    """Every ACL a worker of ``app`` (as ``topology`` froze it) needs, topics sorted by name."""
    reads: set[str] = set(topology.subscribed) | {app.leader_topic.name}
    writes: set[str] = {t for agent in topology.agents for t in agent.writes}
    for table in topology.tables:
        reads.add(table.changelog)
        writes.add(table.changelog)
    for both in (app.cluster_topic.name, app.reply_topic.name):
        reads.add(both)
        writes.add(both)
    topics = {t.name for t in app.all_topics()} | reads | writes
    declared_only = topics - reads - writes - {app.dlq_topic_name}
    writes |= declared_only | ({app.dlq_topic_name} & topics)  # sent to from views, timers, commands
    acls = [Acl("topic", name, _topic_operations(name in reads, name in writes)) for name in sorted(topics)]
    acls.append(Acl("group", app.id, ("Read",), why="the worker's consumer group: join, fetch and commit offsets"))
    if app.conf.driver == "confluent":
        acls.append(Acl("group", app.id, ("AlterConfigs",),
                        why="optional: KIP-848 group timeouts (refused: the worker keeps the classic protocol)"))
        acls.append(Acl("group", "streamkit-manual-", ("Describe",), prefixed=True,
                        why="librdkafka's group-less readers (changelogs, cluster, replies) look up a coordinator"))
    elif app.conf.driver == "aiokafka" and topology.tables and reads_changelogs_with_librdkafka(app.conf):
        acls.append(Acl("group", "streamkit-manual-", ("Describe",), prefixed=True,
                        why="the changelog reader (librdkafka's, on aiokafka too) looks up a coordinator"))
    if app.conf.exactly_once:
        tid = app.conf.transactional_id
        acls.append(Acl("transactional-id", tid or f"{app.id}-", ("Write", "Describe"), prefixed=not tid,
                        why="exactly-once transactional producers"))
    acls.append(Acl("cluster", "kafka-cluster", ("IdempotentWrite",), why="idempotent producers"))
    return acls


def _topic_operations(read: bool, write: bool) -> tuple[str, ...]:
    return (*(("Read",) if read else ()), *(("Write",) if write else ()), "Describe", "Create")


def kafka_acls_lines(acls: Iterable[Acl], principal: str, bootstrap: str, command_config: str | None = None
                     ) -> list[str]:
    """Each ACL as one ``kafka-acls.sh --add`` command (a ``#`` line before one with a reason)."""
    base = f"kafka-acls.sh --bootstrap-server {bootstrap}"
    if command_config:
        base += f" --command-config {command_config}"
    lines = []
    for acl in acls:
        if acl.why:
            lines.append(f"# {acl.why}")
        target = "--cluster" if acl.resource == "cluster" else f"--{acl.resource} {acl.name}"
        pattern = " --resource-pattern-type prefixed" if acl.prefixed else ""
        ops = " ".join(f"--operation {op}" for op in acl.operations)
        lines.append(f"{base} --add --allow-principal {principal} {ops} {target}{pattern}")
    return lines
