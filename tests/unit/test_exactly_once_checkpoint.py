"""The exactly-once checkpoint commits what there is to commit, and only that: offsets alone (an
agent that sends nothing), sends alone (a send made outside any record), and nothing at all
when nothing happened. The tests run the checkpoints (the periodic one is 25 s away)."""
from __future__ import annotations

import uuid

import streamkit as sk
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
