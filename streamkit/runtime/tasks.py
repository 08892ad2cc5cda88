"""Tasks: what one partition number of the co-partition group is doing on this worker.

Kafka Streams' StreamTask is the model: task ``p`` owns partition ``p`` of every source topic and
of every table. Its life is an explicit state machine, every transition logged here and nowhere
else::

    created -> restoring -> running -> suspended -> closed
        \\___________________^    ^_________/  (a task kept through a rebalance resumes)

``restoring``: its table partitions replay their changelogs (the sources stay paused);
``running``: its records are processed; ``suspended``: revoked or fenced, finishing in-flight
records and committing; ``closed``: gone from this worker. ``/ready`` is true once every task
is running (a stateless worker's tasks run as soon as they are assigned); ``/ready`` and
``/metrics`` report each restoring task's progress.

The :class:`TaskManager` owns the state of every source partition (``partitions``: position,
rewinds, revocation, commits, pauses, held dead letters; runtime/partitions.py): the router,
the checkpoint, the pause ledger and the rebalance handler read and change it there. The rest
of a task's state is kept by parts the runtime does not import (the exactly-once producer's
unit, the table partitions' stores and write caches, a windowed join's held records): each is
a :class:`TaskShard` registered here, and the task manager calls it at the task's moments, so
the rebalance handler makes one call per assignment, revocation, loss or fence
(:meth:`TaskManager.open`, :meth:`~TaskManager.rebalanced`, :meth:`~TaskManager.revoke`,
:meth:`~TaskManager.lose`, :meth:`~TaskManager.fence`) and per rewind
(:meth:`~TaskManager.rewound`).
"""
from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable, Hashable, Iterable, Iterator, Mapping, Protocol, Sequence

from ..transport.base import TP
from .partitions import SourcePartition, SourcePartitions

log = logging.getLogger("streamkit.tasks")


class TaskState(StrEnum):
    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"


_ALLOWED: dict[TaskState, frozenset[TaskState]] = {
    TaskState.CREATED: frozenset({TaskState.RESTORING, TaskState.RUNNING, TaskState.CLOSED}),
    TaskState.RESTORING: frozenset({TaskState.RUNNING, TaskState.SUSPENDED, TaskState.CLOSED}),
    TaskState.RUNNING: frozenset({TaskState.SUSPENDED, TaskState.RESTORING, TaskState.CLOSED}),
    TaskState.SUSPENDED: frozenset({TaskState.RESTORING, TaskState.RUNNING, TaskState.CLOSED}),
    TaskState.CLOSED: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass
class Task:
    number: int
    sources: set[TP] = field(default_factory=set)
    state: TaskState = TaskState.CREATED

    def move(self, to: TaskState, why: str) -> None:
        if to == self.state:
            return
        if to not in _ALLOWED[self.state]:
            raise IllegalTransition(f"task {self.number}: {self.state} -> {to} is not a transition ({why})")
        log.info("task %d: %s -> %s (%s)", self.number, self.state.value, to.value, why)
        self.state = to


TableSelection = Callable[[int, int], bool]  # (partition count, number) -> one of the tasks' table partitions


class TaskShard:
    """A part's share of the tasks' state outside their source partitions (a producer unit,
    table partitions, a join's held records). Registered with the :class:`TaskManager`, which
    calls it at the tasks' moments; a moment does nothing unless the part overrides it."""

    async def tasks_opening(self, tps: list[TP]) -> None:
        """``tps`` were assigned and none of their records is read yet (EOS v1 fences here)."""

    async def rebalanced(self, assigned: set[TP]) -> list[TP]:
        """The assignment is now ``assigned``: returns the source partitions paused until this
        part has caught up with it (it resumes them then)."""
        return []

    def tasks_rewound(self, tps: list[TP]) -> None:
        """``tps`` are read again from their committed offsets (a rolled-back checkpoint): forget
        what was learnt of their positions since."""

    def tasks_lost(self, tps: list[TP]) -> None:
        """The group took ``tps`` away: forget their tasks' uncommitted writes (the next owner
        has them as last committed)."""

    async def tasks_revoked(self, tps: list[TP], kept: set[TP]) -> None:
        """``tps`` were given up (committed, or lost); ``kept`` is what this worker still owns."""

    def tasks_fenced(self, tps: list[TP], tables: TableSelection) -> None:
        """A newer owner fenced the tasks of ``tps``, whose table partitions ``tables`` selects:
        forget their state (their tables recover again when they come back)."""

    async def unit_fenced(self, unit: Hashable) -> None:
        """After :meth:`tasks_fenced`: the fenced exactly-once unit starts over."""


class TaskUnits(Protocol):
    """Which exactly-once unit a source partition or a table partition belongs to (the
    transactional producer): what a fence takes."""

    def unit_of(self, tp: TP) -> Hashable: ...
    def unit_of_table(self, partitions: int, number: int) -> Hashable: ...


class TaskShards:
    """The registered shards, in registration order. Held weakly: a restarted agent's join
    stream makes a new aligner, and the old one goes with its stream."""

    def __init__(self) -> None:
        self._refs: list[weakref.ref[TaskShard]] = []
        self.units: TaskUnits | None = None  # the exactly-once producer's units, when there is one

    def add(self, shard: TaskShard) -> None:
        self._refs.append(weakref.ref(shard))

    def __iter__(self) -> Iterator[TaskShard]:
        self._refs = [ref for ref in self._refs if ref() is not None]
        return iter([shard for ref in self._refs if (shard := ref()) is not None])


class TaskManager:
    """The worker's tasks, kept in step with its assignment and its tables' recovery."""

    def __init__(self, group_topics: Iterable[str], partitions: SourcePartitions | None = None,
                 shards: TaskShards | None = None) -> None:
        self.group_topics = frozenset(group_topics)  # the co-partitioned source topics
        self.tasks: dict[int, Task] = {}
        self.assigned_once = False
        # every source partition's state, and the parts keeping the rest of the tasks' state
        # (a topology's TaskManager takes both over from the one before it)
        self.partitions = partitions if partitions is not None else SourcePartitions()
        self.shards = shards if shards is not None else TaskShards()

    def register(self, shard: TaskShard, *, units: TaskUnits | None = None) -> None:
        """``shard`` is called at the tasks' moments from now on; ``units``: it is the
        exactly-once producer, whose units a fence takes."""
        self.shards.add(shard)
        if units is not None:
            self.shards.units = units

    # -- the tasks' moments, for every shard ------------------------------------------------------

    async def open(self, tps: list[TP]) -> None:
        """``tps`` were assigned; before any of their records is read (EOS v1: the previous
        owners' producers are fenced)."""
        for shard in self.shards:
            await shard.tasks_opening(tps)

    async def rebalanced(self, assigned: set[TP]) -> list[TP]:
        """The assignment changed to ``assigned``; returns the source partitions paused until
        the shards caught up (the tables' recovery)."""
        waiting: list[TP] = []
        for shard in self.shards:
            waiting += await shard.rebalanced(assigned)
        return waiting

    def rewound(self, tps: list[TP]) -> None:
        """``tps`` go back to their committed offsets (a rolled-back checkpoint; the router
        rewound them): the shards forget what they learnt of them since."""
        for shard in self.shards:
            shard.tasks_rewound(tps)

    def lose(self, tps: list[TP]) -> None:
        """The group took ``tps`` away: their tasks' uncommitted writes are forgotten, so no
        checkpoint sends them (their next owner has them as last committed)."""
        for shard in self.shards:
            shard.tasks_lost(tps)

    async def revoke(self, tps: list[TP], kept: set[TP], *, stopping: bool, why: str = "revoked") -> None:
        """After their release: the tasks of ``tps`` close, every shard forgets them (the
        producer units of tasks not ``kept`` close), and, unless the worker is ``stopping``,
        the shards follow the assignment that is left."""
        self.close(tps, why)
        for shard in self.shards:
            await shard.tasks_revoked(tps, kept)
        if not stopping:
            await self.rebalanced(kept)

    def fenced_partitions(self, unit: Hashable, owned: Iterable[TP]) -> list[TP]:
        """The partitions of ``owned`` a fence of exactly-once ``unit`` takes."""
        units = self.shards.units
        assert units is not None, "a fence without an exactly-once producer"
        return sorted(tp for tp in owned if units.unit_of(tp) == unit)

    async def fence(self, unit: Hashable, tps: list[TP]) -> None:
        """A newer producer or group generation took exactly-once ``unit`` (its partitions
        ``tps``) over: every shard forgets its tasks' state, then the unit starts over."""
        units = self.shards.units
        assert units is not None, "a fence without an exactly-once producer"
        shards = list(self.shards)
        for shard in shards:  # none awaits: nothing of the fenced tasks is used meanwhile
            shard.tasks_fenced(tps, lambda partitions, number: units.unit_of_table(partitions, number) == unit)
        for shard in shards:
            await shard.unit_fenced(unit)

    def partitions_of(self, number: int) -> list[SourcePartition]:
        """Task ``number``'s source partitions, as this worker reads them."""
        task = self.tasks.get(number)
        return self.partitions.each(sorted(task.sources)) if task is not None else []

    def _numbers(self, tps: Iterable[TP]) -> dict[int, set[TP]]:
        out: dict[int, set[TP]] = {}
        for tp in tps:
            if tp.topic in self.group_topics:
                out.setdefault(tp.partition, set()).add(tp)
        return out

    def assigned(self, tps: Iterable[TP], waiting: Iterable[TP]) -> None:
        """``tps`` arrived; ``waiting``: source partitions paused until their tables recover."""
        self.assigned_once = True
        restoring = {tp.partition for tp in waiting if tp.topic in self.group_topics}
        arrived = self._numbers(tps)
        for number in restoring & set(self.tasks):  # kept tasks whose tables must catch up again
            arrived.setdefault(number, set())
        for number, sources in arrived.items():
            task = self.tasks.get(number)
            if task is None or task.state == TaskState.CLOSED:
                task = self.tasks[number] = Task(number)
            task.sources |= sources
            if number in restoring:
                task.move(TaskState.RESTORING, "its table partitions replay their changelogs")
            else:
                task.move(TaskState.RUNNING, "nothing to restore")

    def restored(self, tps: Iterable[TP]) -> None:
        """These source partitions were resumed: their tasks' tables caught up."""
        for number in self._numbers(tps):
            task = self.tasks.get(number)
            if task is not None and task.state == TaskState.RESTORING:
                task.move(TaskState.RUNNING, "changelogs caught up with the end offsets")

    def suspend(self, tps: Iterable[TP], why: str) -> list[Task]:
        """Tasks losing every source in ``tps`` (or some of them) stop taking records."""
        touched = []
        for number in self._numbers(tps):
            task = self.tasks.get(number)
            if task is not None and task.state != TaskState.CLOSED:
                task.move(TaskState.SUSPENDED, why)
                touched.append(task)
        return touched

    def close(self, tps: Iterable[TP], why: str) -> None:
        for number, gone in self._numbers(tps).items():
            task = self.tasks.get(number)
            if task is None:
                continue
            task.sources -= gone
            if not task.sources:
                task.move(TaskState.CLOSED, why)
                del self.tasks[number]
            elif task.state == TaskState.SUSPENDED:
                task.move(TaskState.RUNNING, "keeps its other source partitions")

    def restoring(self, per_changelog: Mapping[TP, Sequence[int]]) -> dict[int, tuple[int, int]]:
        """(done, total) changelog records of each restoring task, from the recovery's per
        changelog partition counts (derived on demand: nothing to keep in step)."""
        out: dict[int, tuple[int, int]] = {}
        for number in sorted(n for n, t in self.tasks.items() if t.state == TaskState.RESTORING):
            mine = [v for tp, v in per_changelog.items() if tp.partition == number]
            out[number] = (sum(done for done, _ in mine), sum(total for _, total in mine))
        return out

    def count(self, state: TaskState) -> int:
        return sum(1 for t in self.tasks.values() if t.state == state)

    @property
    def running(self) -> bool:
        """True once assigned and every task runs (a worker with no tasks runs nothing: ready)."""
        return self.assigned_once and all(t.state == TaskState.RUNNING for t in self.tasks.values())

    def describe(self, per_changelog: Mapping[TP, Sequence[int]] | None = None) -> dict[str, object]:
        """For /ready: counts per state and each restoring task's progress."""
        states = {s.value: self.count(s) for s in TaskState if s != TaskState.CLOSED and self.count(s)}
        restoring = [{"task": number, "done": done, "total": total}
                     for number, (done, total) in self.restoring(per_changelog or {}).items()]
        out: dict[str, object] = {"tasks": states}
        if restoring:
            out["restoring"] = restoring
        return out
