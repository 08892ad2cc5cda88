"""The classic-protocol assignor for aiokafka workers: co-partitioned, sticky, standby-aware.

aiokafka speaks only the eager protocol, so every rebalance revokes everything; what this
assignor controls is where things land afterwards. A *task* is a partition number of the topics
of one size (partition p of every equally sized topic: range's co-partitioning guarantee, which
tables rely on). Each member's join metadata says which tasks it owned and which table
partitions it keeps warm as standbys (with the changelog offset it reached). The leader then:

1. gives each member its share (sizes differ by at most one);
2. keeps every task with its previous owner while that owner has room (sticky: a task that
   stays keeps its open stores and needs no recovery);
3. places every other task on the member with the most caught-up standby of it that has room
   (Kafka Streams' warm-standby preference, KIP-441), else on the least loaded member.

Members that do not speak it (an older worker) make the group fall back to ``range``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping

import orjson
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

log = logging.getLogger("streamkit.transport")

Task = tuple[int, int]  # (partition count of its topics, partition number)
# What a member says about itself when it joins: {"owned": [[topic, p], ...], "standby": {"<count>:<p>": offset}}
MemberState = Callable[[], dict[str, Any]]


def plan(members: Mapping[str, tuple[Iterable[str], dict[str, Any]]], counts: Mapping[str, int]) -> dict[str, dict[str, list[int]]]:
    """``members``: member id -> (subscribed topics, its state); ``counts``: topic -> partitions.
    Returns member id -> topic -> partitions. Deterministic for equal inputs."""
    subscribed = {m: set(topics) for m, (topics, _) in members.items()}
    topics_of: dict[Task, list[str]] = {}
    for topic in sorted(set().union(*subscribed.values()) if subscribed else ()):
        count = counts.get(topic)
        if count:
            for p in range(count):
                topics_of.setdefault((count, p), []).append(topic)
    tasks = sorted(topics_of)
    order = sorted(members)
    if not order:
        return {}
    base, extra = divmod(len(tasks), len(order))
    previous: dict[Task, str] = {}
    standby: dict[Task, list[tuple[int, str]]] = {}
    for member in order:
        state = members[member][1] or {}
        for topic, p in state.get("owned", ()):
            if topic in counts:
                previous.setdefault((counts[topic], p), member)
        for task_key, offset in (state.get("standby") or {}).items():
            count, _, p = task_key.partition(":")
            standby.setdefault((int(count), int(p)), []).append((int(offset), member))
    # Who gets the extra tasks: the members that already hold the most (fewest moves).
    held = {m: sum(1 for t in tasks if previous.get(t) == m) for m in order}
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(sorted(order, key=lambda m: (-held[m], m)))}
    owner: dict[Task, str] = {}
    load = dict.fromkeys(order, 0)

    def can_take(member: str, task: Task) -> bool:
        return load[member] < quota[member] and any(t in subscribed[member] for t in topics_of[task])

    for task in tasks:  # sticky
        member = previous.get(task)
        if member is not None and member in load and can_take(member, task):
            owner[task] = member
            load[member] += 1
    for task in tasks:
        if task in owner:
            continue
        warm = [m for _, m in sorted(standby.get(task, ()), key=lambda om: (-om[0], om[1])) if can_take(m, task)]
        candidates = warm or sorted((m for m in order if can_take(m, task)), key=lambda m: (load[m], m))
        if not candidates:  # nobody with room subscribes to it: the least loaded subscriber
            candidates = sorted((m for m in order if any(t in subscribed[m] for t in topics_of[task])),
                                key=lambda m: (load[m], m))
        if candidates:
            owner[task] = candidates[0]
            load[candidates[0]] += 1
    out: dict[str, dict[str, list[int]]] = {m: {} for m in order}
    for task, member in owner.items():
        for topic in topics_of[task]:
            if topic in subscribed[member]:
                out[member].setdefault(topic, []).append(task[1])
    return out


class TaskAssignor(AbstractPartitionAssignor):
    """aiokafka calls these on the instance it was given (``partition_assignment_strategy``)."""

    name = "streamkit-tasks"
    version = 0

    def __init__(self) -> None:
        self.state: MemberState = lambda: {}

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:  # type: ignore[override]
        try:
            state = self.state()
        except Exception as exc:  # never fail a join over it: an empty state means "no preference"
            log.warning("member state for the assignor failed: %r", exc)
            state = {}
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), orjson.dumps(state))

    def assign(self, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
               ) -> dict[str, ConsumerProtocolMemberAssignment]:  # type: ignore[override]
        counts: dict[str, int] = {}
        decoded: dict[str, tuple[list[str], dict[str, Any]]] = {}
        for member, meta in members.items():
            try:
                state = orjson.loads(meta.user_data) if meta.user_data else {}
            except orjson.JSONDecodeError:
                state = {}
            decoded[member] = (list(meta.subscription), state if isinstance(state, dict) else {})
            for topic in meta.subscription:
                partitions = cluster.partitions_for_topic(topic)
                if partitions:
                    counts[topic] = len(partitions)
        planned = plan(decoded, counts)
        return {member: ConsumerProtocolMemberAssignment(
                    self.version, sorted((t, sorted(ps)) for t, ps in planned.get(member, {}).items()), b"")
                for member in members}

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        pass
