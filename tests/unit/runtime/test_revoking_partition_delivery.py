# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""A partition being revoked delivers nothing more until it is released.

A client may hand out records of a partition while its revocation runs (aiokafka's fetcher did,
eager rebalance on Apache Kafka 4.1). The revocation stops the partition's queued records
(revoke) and commits what was processed; a batch delivered after that point was not revoked, so
the stream went on with it past the records the revocation had stopped: its outputs went into
the revocation's transaction, the offset committed stayed at the first stopped record, and the
next owner processed those records again. Chaos run: aiokafka exactly-once, 2 workers, 580
outputs and 2,561 dead letters committed twice."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker

TP0 = TP("in", 0)


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default data_dir, for the tables' stores


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_records_fetched_while_a_partition_is_revoked_are_not_processed(guarantee):
    name = f"revoking-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                 processing_guarantee=guarantee, commit_interval=25)  # the test checkpoints
    source, out = app.topic("in", partitions=1), app.topic("out", partitions=1)
    gate, at_gate = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    @app.agent(source)
    async def forward(stream):
        async for value in stream:
            done.append(value)
            if value == "hold":
                at_gate.set()
                await gate.wait()
            await out.send_soon(value=value)

    broker = MemoryBroker.named(app.conf.bootstrap_servers)

    def feed(*values):
        for value in values:
            broker.append("in", None, source.value_codec.encode(value), 0, None, None)

    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: runtime.assigned, 10, message="assigned")
        feed("a", "hold", "b")  # one fetched batch
        await asyncio.wait_for(at_gate.wait(), 10)
        revoking = asyncio.create_task(runtime.ownership.on_revoked([TP0]))  # the client's callback; its fetcher goes on
        await asyncio.sleep(0)
        feed("c")
        rounds = runtime.fetch_rounds
        await wait_for(lambda: runtime.fetch_rounds >= rounds + 3, 10, message="fetches after c was written")
        gate.set()
        await asyncio.wait_for(revoking, 20)
        assert done == ["a", "hold"], "a record was processed after its partition's revocation began"
        committed = broker.committed[app.id][TP0]
        tp = TP("out", 0)
        hidden = broker.aborted.get(tp, set()) | broker.control.get(tp, set())
        end = broker.stable_offset(tp) if guarantee == "exactly_once" else len(broker.logs["out"][0])
        outputs = [m.value for m in broker.logs["out"][0][:end] if m.offset not in hidden]
        assert committed == 2 and outputs == [out.value_codec.encode(v) for v in ("a", "hold")], (committed, outputs)


async def test_a_partition_assigned_afresh_delivers_again_even_if_its_revocation_was_cut_short():
    """The revocation normally ends by forgetting the partition; one cut short (cancelled) must
    not leave it undeliverable when the group hands it back."""
    name = f"revoking-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, commit_interval=25)
    source = app.topic("in", partitions=1)
    done: list[str] = []

    @app.agent(source)
    async def read(stream):
        async for value in stream:
            done.append(value)

    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: runtime.assigned, 10, message="assigned")
        runtime.router.revoke([TP0])  # a revocation that never reached its end
        await runtime.ownership.on_assigned([TP0])
        broker.append("in", None, source.value_codec.encode("x"), 0, None, None)
        await wait_for(lambda: done == ["x"], 10, message="the record of the partition assigned afresh")
