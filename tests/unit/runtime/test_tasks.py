"""Tasks: one per partition number of the co-partition group, with an explicit state machine that
follows assignment, recovery, revocation and stop."""
from __future__ import annotations

import gc
import uuid

import pytest

from streamkit.runtime.tasks import IllegalTransition, Task, TaskManager, TaskShard, TaskState
from streamkit.testing import wait_for
from streamkit.transport import TP
from tests.helpers import memory_word_counters


def tps(topic, *numbers):
    return [TP(topic, n) for n in numbers]


def test_lifecycle_of_a_task_and_the_transitions_it_refuses(caplog):
    caplog.set_level("INFO", logger="streamkit.tasks")
    manager = TaskManager(["clicks", "views"])
    manager.assigned(tps("clicks", 0, 1) + tps("views", 0, 1) + [TP("app-__leader", 0)], waiting=tps("clicks", 1))
    assert {n: t.state for n, t in manager.tasks.items()} == {0: TaskState.RUNNING, 1: TaskState.RESTORING}
    assert manager.tasks[0].sources == {TP("clicks", 0), TP("views", 0)}  # internal topics make no task
    assert not manager.running
    manager.restored(tps("clicks", 1))
    assert manager.running and manager.describe() == {"tasks": {"running": 2}}
    manager.suspend(tps("clicks", 1), "revoked")
    manager.close(tps("clicks", 1), "revoked")
    assert manager.tasks[1].state == TaskState.RUNNING  # keeps views[1]: an incremental revoke of one topic
    manager.suspend(tps("views", 1), "revoked")
    manager.close(tps("views", 1), "revoked")
    assert 1 not in manager.tasks and manager.running
    assert "task 1: restoring -> running" in caplog.text
    task = Task(7)
    task.move(TaskState.CLOSED, "gone")
    with pytest.raises(IllegalTransition, match="closed -> running"):
        task.move(TaskState.RUNNING, "no")


def test_restore_progress_per_task():
    manager = TaskManager(["clicks"])
    manager.assigned(tps("clicks", 0, 1), waiting=tps("clicks", 0, 1))
    per_changelog = ({TP("app-counts-changelog", 0): [5, 10], TP("app-other-changelog", 0): [1, 2],
                      TP("app-counts-changelog", 1): [0, 100]})
    assert manager.describe(per_changelog)["restoring"] == [{"task": 0, "done": 6, "total": 12},
                                               {"task": 1, "done": 0, "total": 100}]


async def test_a_worker_moves_its_tasks_through_join_and_stop(tmp_path):
    name = f"tasks-{uuid.uuid4().hex[:6]}"
    apps = memory_word_counters(name, tmp_path, partitions=4, store="memory://", commit_interval=0.05)
    first, second = apps
    async with first.running():
        await wait_for(lambda: first.runtime.tasks.running and len(first.runtime.tasks.tasks) == 4, 10,
                       message="four running tasks")
        async with second.running():
            await wait_for(lambda: second.runtime.tasks.running and len(second.runtime.tasks.tasks) == 2
                           and len(first.runtime.tasks.tasks) == 2, 10, message="two tasks each")
            assert set(first.runtime.tasks.tasks).isdisjoint(second.runtime.tasks.tasks)
        await wait_for(lambda: first.runtime.tasks.running and len(first.runtime.tasks.tasks) == 4, 10,
                       message="the first worker runs all four again")
        tasks = first.runtime.tasks
    assert tasks.tasks == {}  # stop closes every task


class Recording(TaskShard):
    """A shard that notes each moment it is called at."""

    def __init__(self, name: str, calls: list) -> None:
        self.name, self.calls = name, calls

    async def rebalanced(self, assigned):
        self.calls.append((self.name, "rebalanced", sorted(assigned)))
        return []

    def tasks_lost(self, tps):
        self.calls.append((self.name, "lost", tps))

    async def tasks_revoked(self, tps, kept):
        self.calls.append((self.name, "revoked", tps, sorted(kept)))

    def tasks_fenced(self, tps, tables):
        self.calls.append((self.name, "fenced", tps, [n for n in range(4) if tables(4, n)]))

    async def unit_fenced(self, unit):
        self.calls.append((self.name, "reopened", unit))


class PerTask(Recording):
    """An EOS v1 producer's units: one per task."""

    def unit_of(self, tp):
        return (4, tp.partition)

    def unit_of_table(self, partitions, number):
        return (partitions, number)


async def test_a_revocation_or_a_fence_is_one_call_that_drives_every_shard_of_the_tasks():
    calls: list = []
    first = TaskManager(())
    producer = PerTask("producer", calls)
    first.register(producer, units=producer)
    manager = TaskManager(["clicks"], first.partitions, first.shards)  # the topology's: takes the shards over
    tables = Recording("tables", calls)
    manager.register(tables)
    manager.assigned(tps("clicks", 0, 1, 2), waiting=[])
    await manager.revoke(tps("clicks", 2), set(tps("clicks", 0, 1)), stopping=False)
    assert calls == [("producer", "revoked", tps("clicks", 2), tps("clicks", 0, 1)),
                     ("tables", "revoked", tps("clicks", 2), tps("clicks", 0, 1)),
                     ("producer", "rebalanced", tps("clicks", 0, 1)), ("tables", "rebalanced", tps("clicks", 0, 1))]
    assert set(manager.tasks) == {0, 1}
    calls.clear()
    fenced = manager.fenced_partitions((4, 1), tps("clicks", 0, 1))
    assert fenced == tps("clicks", 1)
    await manager.fence((4, 1), fenced)
    # every shard forgets the unit's tasks (its table partitions only) before the unit starts over
    assert calls == [("producer", "fenced", fenced, [1]), ("tables", "fenced", fenced, [1]),
                     ("producer", "reopened", (4, 1)), ("tables", "reopened", (4, 1))]
    calls.clear()
    manager.lose(tps("clicks", 0))
    await manager.revoke(tps("clicks", 0), set(), stopping=True)  # a stopping worker's tables follow nothing
    assert [c[:2] for c in calls] == [("producer", "lost"), ("tables", "lost"), ("producer", "revoked"),
                                      ("tables", "revoked")]
    calls.clear()
    del tables
    gc.collect()
    manager.lose(tps("clicks", 1))  # a shard gone (a restarted agent's join stream) is not called
    assert calls == [("producer", "lost", tps("clicks", 1))]
