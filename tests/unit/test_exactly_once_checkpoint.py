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
