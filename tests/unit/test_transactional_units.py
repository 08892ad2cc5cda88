"""TransactionalProducer.commit, unit by unit (EOS v1: one transaction per task): a task given up
meanwhile is skipped without stopping the others; a unit that fails reports its own error while
the next one still commits; the ids are the task's, stable across workers (so a new owner
fences a zombie)."""
from __future__ import annotations

import uuid

import streamkit as sk
from streamkit.runtime.transactions import TransactionalProducer
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryDriver


async def units(name, owned, *, per_partition=True, topic="in", partitions=4):
    """A started TransactionalProducer on a fresh memory broker, owning tasks ``owned`` of ``topic``."""
    app = sk.App(name, broker=f"memory://{name}", driver="memory")
    driver = MemoryDriver(app.conf)
    driver.broker.create_topic(topic, partitions)
    txns = TransactionalProducer(driver, name, per_partition=per_partition, transactional_id=f"{name}-w",
                                 partition_count=lambda _topic: partitions)
    await txns.start()
    await txns.assigned([TP(topic, p) for p in owned])
    return driver.broker, txns


async def test_a_task_given_up_is_skipped_and_the_later_tasks_still_commit():
    name = f"units-{uuid.uuid4().hex[:6]}"
    broker, txns = await units(name, owned=[1, 3])
    try:
        outcome = await txns.commit({TP("in", 0): 5, TP("in", 1): 7, TP("in", 3): 9}, name)
        assert outcome == {(4, 1): None, (4, 3): None}  # task 0 was never (or no longer) ours
        assert broker.committed[name] == {TP("in", 1): 7, TP("in", 3): 9}
    finally:
        await txns.stop()


async def test_a_failed_unit_reports_its_error_and_the_next_unit_commits():
    name = f"units-{uuid.uuid4().hex[:6]}"
    broker, txns = await units(name, owned=[0, 2])
    try:
        broker.faults.fail_txn_commits = 1  # the first unit's commit (tasks commit in order)
        outcome = await txns.commit({TP("in", 0): 3, TP("in", 2): 4}, name)
        assert isinstance(outcome[(4, 0)], Exception) and outcome[(4, 2)] is None
        assert broker.committed[name] == {TP("in", 2): 4}
        assert not txns.dirty  # neither is left marked: the caller decides what the failure means
    finally:
        await txns.stop()


async def test_task_transactional_ids_name_the_app_the_task_and_the_partition_count():
    name = f"units-{uuid.uuid4().hex[:6]}"
    _, txns = await units(name, owned=[2])
    try:
        assert txns.task_id((4, 2)) == f"{name}-task-2of4"
        assert sorted(txns.units) == [(4, 2)]
    finally:
        await txns.stop()


async def test_sends_wait_while_a_commit_holds_them_and_go_into_the_next_transaction():
    """EOS v2 (one unit): a send made while the checkpoint commits must not join the committing
    transaction; it waits, then joins the next one."""
    import asyncio

    broker, txns = await units(f"units-{uuid.uuid4().hex[:6]}", [], per_partition=False, topic="out", partitions=1)
    name = txns.app_id
    try:
        async with txns.sends_paused():
            held = asyncio.create_task(txns.send("out", b"k", b"late", partition=0))
            await asyncio.sleep(0)
            assert not txns.try_send("out", b"k", b"refused", 0), "try_send went through a paused gate"
            await txns.commit({}, name)
            assert not held.done() and not txns.dirty, "a send joined the committing transaction"
        await held
        assert txns.dirty == {(0, 0)}  # the send is in the transaction opened after the commit
        await txns.commit({}, name)
        assert [m.value for m in broker.logs["out"][0] if m.value is not None] == [b"late"]
    finally:
        await txns.stop()
