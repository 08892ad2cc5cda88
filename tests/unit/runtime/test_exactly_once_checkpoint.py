"""The exactly-once checkpoint commits what there is to commit, and only that: offsets alone (an
agent that sends nothing), sends alone (a send made outside any record), and nothing at all
when nothing happened. The tests run the checkpoints (the periodic one is 25 s away)."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import streamkit as sk
from streamkit.errors import TransactionAborted
from streamkit.testing import wait_for
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker


def eos_app():
    name = f"eosck-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                 processing_guarantee="exactly_once", commit_interval=25)  # the test checkpoints
    source = app.topic("in", partitions=1)
    seen: list = []

    @app.agent(source)
    async def read(stream):
        async for value in stream:
            seen.append(value)

    return app, source, seen, MemoryBroker.named(app.conf.bootstrap_servers)


async def test_offsets_alone_are_committed_in_a_transaction():
    app, source, seen, broker = eos_app()
    async with app.running():
        await wait_for(lambda: app.runtime.assigned, 10, message="assigned")
        for i in range(3):
            await source.send(value=f"v{i}")  # sent from no record: in the worker's transaction
        await app.runtime.checkpoint.commit()  # makes them readable (read_committed)
        await wait_for(lambda: len(seen) == 3, 10, message="three records read")
        before = app.runtime.checkpoint.commits
        await app.runtime.checkpoint.commit()
        assert broker.committed[app.id][TP("in", 0)] == 3
        assert app.runtime.checkpoint.commits == before + 1
        await app.runtime.checkpoint.commit()  # nothing new: no transaction, no commit counted
        assert app.runtime.checkpoint.commits == before + 1


async def test_a_send_outside_any_record_becomes_visible_at_the_next_checkpoint():
    app, source, seen, broker = eos_app()
    out = app.topic("out", partitions=1)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned, 10, message="assigned")
        await app.runtime.checkpoint.commit()
        await out.send(value="from a timer")
        tp = TP("out", 0)
        assert broker.stable_offset(tp) == 0, "the send is in an open transaction"
        await app.runtime.checkpoint.commit()
        assert broker.stable_offset(tp) == broker.end_offset(tp) > 0, "the checkpoint left it uncommitted"


async def test_a_table_write_outside_any_record_is_committed_by_the_next_checkpoint(tmp_path, monkeypatch):
    """No offset moved and nothing was sent, but a table changed (a timer wrote it): the
    checkpoint still has a transaction to commit, its changelog record."""
    monkeypatch.chdir(tmp_path)  # the default data_dir, for the table's store
    app, source, seen, broker = eos_app()
    totals = app.Table("totals", default=int, partitions=1)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="table ready")
        await app.runtime.checkpoint.commit()
        totals["from a timer"] = 7
        await app.runtime.checkpoint.commit()
        tp = TP(f"{app.id}-totals-changelog", 0)
        committed = [m for m in broker.logs[tp.topic][0][:broker.stable_offset(tp)]
                     if m.offset not in broker.control.get(tp, set()) | broker.aborted.get(tp, set())]
        assert [b"from a timer" in m.key for m in committed] == [True], "the table change was not committed"
        assert totals["from a timer"] == 7


async def test_a_send_made_while_a_failed_transaction_is_rolled_back_waits_for_the_next_one():
    """A timer sends while the checkpoint replaces the producer of a transaction whose commit
    failed (the broker is away, so the new producer waits for it): the send waits for the new
    transaction instead of failing, and is committed by the next checkpoint."""
    app, source, seen, broker = eos_app()
    out = app.topic("out", partitions=1)
    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: runtime.assigned, 10, message="assigned")
        await out.send(value="before")  # something to commit
        broker.faults.outage(3600)  # until the test ends it
        commit = asyncio.create_task(runtime.checkpoint.commit())
        await wait_for(lambda: (0, 0) not in runtime.txns.units or commit.done(), 10,
                       message="the failed transaction's producer being replaced")
        late = asyncio.create_task(out.send(value="late"))
        broker.faults.end_outage()
        with pytest.raises(TransactionAborted):
            await asyncio.wait_for(commit, 10)
        await asyncio.wait_for(late, 10)  # no error: it waited for the new transaction
        await runtime.checkpoint.commit()
        tp = TP("out", 0)
        committed = [m.value for m in broker.logs["out"][0][:broker.stable_offset(tp)]
                     if m.offset not in broker.control.get(tp, set()) | broker.aborted.get(tp, set())]
        assert committed == [out.value_codec.encode("late")]


async def test_a_failed_transaction_counts_one_abort_and_one_rollback():
    app, source, seen, broker = eos_app()
    out = app.topic("out", partitions=1)
    async with app.running():
        checkpoint = app.runtime.checkpoint
        await wait_for(lambda: app.runtime.assigned, 10, message="assigned")
        broker.faults.fail_sends = 1
        await out.send(value="lost")  # its delivery fails: the checkpoint aborts the transaction
        with pytest.raises(TransactionAborted):
            await checkpoint.commit()
        assert (checkpoint.aborts, checkpoint.rollbacks) == (1, 1)
        await out.send(value="delivered")
        await checkpoint.commit()
        assert (checkpoint.aborts, checkpoint.rollbacks) == (1, 1)
        assert broker.stable_offset(TP("out", 0)) == broker.end_offset(TP("out", 0))


async def test_a_failed_changelog_send_rolls_back_every_task_even_one_with_only_offsets(tmp_path, monkeypatch):
    """EOS v1 (a transaction per task): the changelog record of task 0 cannot be sent (its
    producer was fenced), so nothing of this checkpoint commits, including task 1, whose records
    changed nothing and sent nothing. The checkpoint must not count task 1's offsets as committed:
    they never reached the group, and a checkpoint sends only offsets that moved since."""
    monkeypatch.chdir(tmp_path)  # the default data_dir, for the table's store
    name = f"eosck-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                 processing_guarantee="exactly_once", transaction_producer="partition", commit_interval=25)
    source = app.topic("in", partitions=2, key_type=str, value_type=str)
    counts = app.Table("counts", default=int, partitions=2)
    seen: list[str] = []

    @app.agent(source)
    async def count(stream):
        async for event in stream.events():
            if event.value == "count":
                counts[event.key] += 1
            seen.append(event.value)

    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    key0 = next(k for k in (f"k{i}" for i in range(100))
                if counts.partition_of(source.key_codec.encode(k)) == 0)
    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: runtime.assigned and runtime.tables.ready, 10, message="table ready")
        broker.append("in", source.key_codec.encode(key0), source.value_codec.encode("count"), 0, None, None)
        broker.append("in", b"x", source.value_codec.encode("nothing"), 1, None, None)
        await wait_for(lambda: sorted(seen) == ["count", "nothing"] and not runtime.router.holding(), 10,
                       message="both records processed")
        successor = app.driver.producer(transactional_id=runtime.txns.unit_transactional_id((2, 0)))
        await successor.init_transactions()  # fences task 0's producer
        with pytest.raises(TransactionAborted):
            await runtime.checkpoint.commit()
        group = broker.committed.get(app.id, {})
        claimed = {tp: o for tp, o in runtime.checkpoint.committed.items() if group.get(tp) != o}
        assert not claimed, f"offsets counted as committed that the group does not have: {claimed}"
