"""A source partition's state is one object whose moments (assignment, revocation, rewind,
release, forgetting) change every part of it together."""
from __future__ import annotations

from streamkit.runtime.checkpoint import Checkpoint
from streamkit.runtime.dead_letters import HeldDeadLetters
from streamkit.runtime.partitions import SourcePartitions
from streamkit.runtime.router import Router
from streamkit.runtime.tasks import TaskManager
from streamkit.transport.base import TP, Message

IN0, IN1 = TP("in", 0), TP("in", 1)


class Consumer:
    def take_failed_commits(self) -> list[TP]:
        return []


def message(offset: int) -> Message:
    return Message("in", 0, offset, b"k", b"v", None, 0)


def test_a_rewind_goes_back_to_the_commit_else_the_first_record_and_outlives_forgetting():
    partitions = SourcePartitions()
    state = partitions[IN0]
    state.first_delivered, state.delivered = 40, 60
    assert state.rewind() == 40  # nothing committed yet: the first record handed out
    assert (state.delivered, state.first_delivered, state.rewinds) == (None, None, 1)
    state.first_delivered, state.committed = 60, 55
    assert state.rewind() == 55
    state.forget()
    assert partitions[IN0].rewinds == 2  # a batch delivered across the rewind still compares against it


def test_router_rewind_drops_held_letters_and_returns_the_targets():
    partitions = SourcePartitions()
    router = Router(None, partitions)  # type: ignore[arg-type]  # no delivery here
    held = HeldDeadLetters(partitions)
    router.held_letters = held
    for tp, first in ((IN0, 10), (IN1, 20)):
        partitions[tp].first_delivered = partitions[tp].delivered = first
    held.add(partitions[IN0], message(11), "letter")
    assert len(held) == 1
    assert router.rewind([IN0]) == {IN0: 10}
    assert len(held) == 0 and router.reading() == [IN1]
    assert router.delivered == {IN1: 20}


def test_held_letters_leave_in_offset_order_once_the_offset_passes_them():
    partitions = SourcePartitions()
    held = HeldDeadLetters(partitions)
    for offset in (3, 5, 9):
        held.add(partitions[IN0], message(offset), offset)
    assert [letter for _, letter in held.due({IN0: 6, IN1: 100})] == [3, 5]
    assert [letter for _, letter in held.due({IN0: 10})] == [9]
    assert len(held) == 0


def test_a_released_partition_keeps_its_progress_until_owned_again_and_forgets_its_commit():
    partitions = SourcePartitions()
    checkpoint = Checkpoint(Router(None, partitions), Consumer(), None, rewind=None)  # type: ignore[arg-type]
    partitions[IN0].delivered = 30
    partitions[IN0].committed = 25
    assert checkpoint.offsets_to_commit() == {IN0: 30}
    checkpoint.forget([IN0])
    assert checkpoint.released == {IN0: 30} and checkpoint.committed == {}
    partitions[IN0].revoke()
    partitions[IN0].assigned()
    assert checkpoint.released == {} and not partitions[IN0].revoking


def test_pending_seeks_are_taken_once_and_only_for_the_partitions_asked():
    partitions = SourcePartitions()
    partitions.seek_later(IN0, 7)
    partitions.seek_later(IN1, 9)
    assert partitions.take_seeks([IN1]) == {IN1: 9}
    assert partitions.seeking == {IN0}
    assert partitions.take_seeks() == {IN0: 7}
    assert partitions.take_seeks() == {} and not partitions.seeking


def test_the_task_manager_hands_its_partitions_to_the_topologys_manager_and_knows_each_tasks():
    first = TaskManager(())
    frozen = TaskManager(("in",), first.partitions)
    frozen.assigned([IN0, TP("other", 0)], waiting=[])
    assert [s.tp for s in frozen.partitions_of(0)] == [IN0]
    assert frozen.partitions_of(0)[0] is first.partitions[IN0]
