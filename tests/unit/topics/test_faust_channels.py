"""``app.channel()`` as a Faust app uses it: an agent input in this process, nothing through Kafka."""
from __future__ import annotations

import uuid

import orjson
import pytest

import streamkit as faust
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def memory_app(**settings):
    name = f"fch-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     **settings)


async def test_an_agent_reads_a_channel_and_its_sink_gets_the_results():
    app = memory_app()
    numbers = app.channel(value_type=int)
    squares = app.topic("squares", value_type=int)
    seen = []

    @app.agent(numbers, sink=[squares])
    async def square(stream):
        async for n in stream:
            seen.append(n)
            yield n * n

    async with app.running():
        for n in (2, 3):
            await numbers.send(value=n)
        await square.cast(4)  # the agent's own helpers reach its channel too
        await wait_for(lambda: len(seen) == 3, 10, message="three numbers squared")
        await app.runtime.checkpoint.commit()
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        assert sorted(int(m.value) for part in broker.logs["squares"] for m in part) == [4, 9, 16]
        assert numbers.name not in broker.logs  # nothing of the channel went to the broker
        with pytest.raises(NotImplementedError, match="ask\\(\\) needs a topic"):
            await square.ask(5)


async def test_a_record_failing_in_a_channel_agent_reaches_the_dead_letter_topic_encoded():
    app = memory_app(agent_retries=0)
    orders = app.channel(value_type=dict)
    done = []

    @app.agent(orders)
    async def check(stream):
        async for order in stream:
            if order["amount"] < 0:
                raise ValueError("negative amount")
            done.append(order)

    async with app.running():
        await orders.send(key="o1", value={"amount": -1})
        await orders.send(key="o2", value={"amount": 5})
        await wait_for(lambda: done, 10, message="the good order processed after the bad one")
        await app.runtime.checkpoint.commit()
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        dead = [m for part in broker.logs.get(app.dlq_topic_name, []) for m in part]
        assert [(m.key, orjson.loads(m.value)) for m in dead] == [(b"o1", {"amount": -1})]
