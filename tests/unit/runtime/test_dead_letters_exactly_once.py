"""Exactly-once: a dead letter is committed with its record's offset, never ahead of it.

A record that does not decode fails when its batch is delivered, before the agent reached the
records ahead of it. Its dead letter was sent then and joined the transaction of the next
checkpoint, whose offset stops at the first record the agent had not processed: the dead letter
was committed, its record's offset was not, and whoever read the partition again from that
offset (the next owner after a rebalance, the worker after a rollback or restart) dead-lettered
it again. Apache Kafka 4.1 chaos run (aiokafka exactly-once, 10,000 malformed of 50,000, an eager
rebalance at start): 12,428-14,788 dead letters for 10,000."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import streamkit as sk
from streamkit.runtime.dead_letters import HEADER_OFFSET
from streamkit.testing import wait_for
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker

TP0 = TP("in", 0)


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default data_dir, for the tables' stores


def committed_dead_letters(broker: MemoryBroker, topic: str) -> list[int]:
    """Source offsets of the dead letters a read_committed reader sees."""
    offsets = []
    for number, log in enumerate(broker.logs.get(topic, [])):
        tp = TP(topic, number)
        hidden = broker.aborted.get(tp, set()) | broker.control.get(tp, set())
        for m in log[:broker.stable_offset(tp)]:
            if m.offset not in hidden:
                offsets.append(int(dict(m.headers)[HEADER_OFFSET]))
    return sorted(offsets)


@pytest.mark.parametrize("mode", ["worker", "partition"])
async def test_a_dead_letter_is_committed_with_its_records_offset_not_before(mode):
    name = f"dlq-eos-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                 processing_guarantee="exactly_once", transaction_producer=mode,
                 commit_interval=25)  # the test checkpoints
    source, out = app.topic("in", value_type=int, partitions=1), app.topic("out", value_type=int, partitions=1)
    gate, at_gate = asyncio.Event(), asyncio.Event()
    done: list[int] = []

    @app.agent(source)
    async def forward(stream):
        async for value in stream:
            if value == 0:
                at_gate.set()
                await gate.wait()
            done.append(value)
            await out.send_soon(value=value)

    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: runtime.assigned, 10, message="assigned")
        for value in (b"0", b"1", b"not json", b"3"):  # one fetched batch; offset 2 does not decode
            broker.append("in", None, value, 0, None, None)
        await asyncio.wait_for(at_gate.wait(), 10)
        await wait_for(lambda: runtime.errors.counts["dlq"] == 1, 10, message="the bad record judged")
        checkpoint = asyncio.create_task(runtime.checkpoint.commit())
        await wait_for(lambda: runtime.router.barrier.closed, 10, message="the checkpoint started")
        gate.set()  # the checkpoint waits for record 0; record 1 waits for the checkpoint
        committed = await asyncio.wait_for(checkpoint, 10)
        assert committed == {TP0: 1}
        assert committed_dead_letters(broker, app.dlq_topic_name) == [], (
            "a dead letter was committed with offset 1, ahead of its record (offset 2)")
        await wait_for(lambda: done == [0, 1, 3], 10, message="the rest processed")
        assert await runtime.checkpoint.commit() == {TP0: 4}
        assert committed_dead_letters(broker, app.dlq_topic_name) == [2]
