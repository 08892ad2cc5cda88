"""A checkpoint that starts while a record is half-way through an agent (it waits at a gate the
test opens): the checkpoint waits for it (``_quiesce``), so the offsets it commits and the table
changes and outputs it commits are those of the same records; a rolled-back checkpoint waits
for it before it drops the table changes, so nothing the record writes afterwards survives the
rollback and is counted again when the record is processed again."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import streamkit as sk
import streamkit.runtime.checkpoint as checkpoint_module
from streamkit.tables.marks import MARK_KEY
from streamkit.testing import wait_for
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker
from streamkit.transport.pending import DeliveryFailed


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default data_dir, for the tables' stores


def gated_app(guarantee, *, write_before_gate):
    """``in`` → count per value in a table, send the value to ``out``; the record ``hold``
    stops at a gate: after its table write and send (``write_before_gate``) or before them."""
    name = f"inprog-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                 processing_guarantee=guarantee, commit_interval=25)  # the test checkpoints
    source = app.topic("in", partitions=1)
    out = app.topic("out", partitions=1)
    counts = app.Table("counts", default=int, partitions=1)
    gate, at_gate = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    async def effects(value):
        counts[value] += 1
        await out.send(value=value)

    @app.agent(source)
    async def count(stream):
        async for value in stream:
            if write_before_gate:
                await effects(value)
            if value == "hold":
                at_gate.set()
                await gate.wait()
            if not write_before_gate:
                await effects(value)
            done.append(value)

    broker = MemoryBroker.named(app.conf.bootstrap_servers)

    def feed(*values):
        for value in values:
            broker.append("in", None, source.value_codec.encode(value), 0, None, None)

    return app, counts, gate, at_gate, done, broker, feed


async def checkpoint_while_a_record_waits(app, feed, at_gate) -> asyncio.Task:
    """Feed "a" then "hold" (which waits at the gate half-way through the agent) and start a
    checkpoint meanwhile: the task of that checkpoint."""
    await wait_for(lambda: app.runtime.assigned, 10, message="assigned")
    feed("a", "hold")
    await asyncio.wait_for(at_gate.wait(), 10)
    return asyncio.create_task(app.runtime.checkpoint.commit())


def committed_outputs(broker, topic="out"):
    tp = TP(topic, 0)
    hidden = broker.aborted.get(tp, set()) | broker.control.get(tp, set())
    return [m.value for m in broker.logs[topic][0][:broker.stable_offset(tp)] if m.offset not in hidden]


def changelog_keys(broker, app):
    return [m.key for m in broker.logs[f"{app.id}-counts-changelog"][0] if m.key != MARK_KEY]


async def test_at_least_once_a_checkpoint_waits_for_the_record_in_progress(monkeypatch):
    """The wait is bounded (ALO_QUIESCE_LIMIT, 0.1 s); raised here so that a loaded machine
    cannot make the record miss it. The record's table change is taken by this checkpoint, so
    its offset must be committed by it too."""
    monkeypatch.setattr(checkpoint_module, "ALO_QUIESCE_LIMIT", 60.0)
    app, counts, gate, at_gate, done, broker, feed = gated_app("at_least_once", write_before_gate=True)
    async with app.running():
        runtime = app.runtime
        commit = await checkpoint_while_a_record_waits(app, feed, at_gate)
        await wait_for(lambda: runtime.router.barrier.closed or commit.done(), 10, message="the checkpoint started")
        gate.set()
        committed = await asyncio.wait_for(commit, 10)
        assert done == ["a", "hold"]
        assert any(b"hold" in key for key in changelog_keys(broker, app)), "the record's change was not taken"
        assert committed == {TP("in", 0): 2}, "the record's table change went out without its offset"
        assert broker.committed[app.id][TP("in", 0)] == 2


async def test_exactly_once_a_checkpoint_waits_for_the_record_in_progress():
    """The record has sent its output and written the table when the checkpoint starts: a
    transaction holding them must hold its offset too, or the record is processed again after
    a restart and its output is there twice."""
    app, counts, gate, at_gate, done, broker, feed = gated_app("exactly_once", write_before_gate=True)
    async with app.running():
        runtime = app.runtime
        commit = await checkpoint_while_a_record_waits(app, feed, at_gate)
        await wait_for(lambda: runtime.router.barrier.closed or commit.done(), 10, message="the checkpoint started")
        gate.set()
        await asyncio.wait_for(commit, 10)
        assert done == ["a", "hold"]
        outputs = committed_outputs(broker)
        assert len(outputs) == broker.committed[app.id][TP("in", 0)], (
            f"committed outputs {outputs} but offset {broker.committed[app.id][TP('in', 0)]}")
        assert len(outputs) == 2


async def test_at_least_once_a_rollback_waits_for_the_record_in_progress_before_dropping_changes():
    """The record writes its table change after the rollback started: dropped only if the
    rollback waited for it; otherwise it stays, and the record, processed again, counts twice."""
    app, counts, gate, at_gate, done, broker, feed = gated_app("at_least_once", write_before_gate=False)
    lost = {"a"}

    def fail_first_a(topic, value):  # the first delivery of "a" to out fails (seen at the flush)
        if topic == "out" and value is not None and b"a" in value and lost:
            lost.clear()
            return True
        return False

    broker.faults.fail_send_if = fail_first_a
    async with app.running():
        runtime = app.runtime
        commit = await checkpoint_while_a_record_waits(app, feed, at_gate)
        await wait_for(lambda: runtime.checkpoint.rollbacks == 1 or commit.done(), 10, message="the rollback")
        gate.set()
        with pytest.raises(DeliveryFailed):
            await asyncio.wait_for(commit, 10)
        assert not lost
        await wait_for(lambda: done == ["a", "hold", "a", "hold"] and not runtime.router.holding(), 10,
                       message="both records processed again after the rollback")
        await runtime.checkpoint.commit()
        assert broker.committed[app.id][TP("in", 0)] == 2
        assert (counts["a"], counts["hold"]) == (1, 1), "a change made during the rollback survived it"
