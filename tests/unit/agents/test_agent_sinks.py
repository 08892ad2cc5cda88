"""Whatever Faust takes as an agent's sink, streamkit takes: topics, channels, agents (on a topic
or a channel) and callables (plain or async), each getting every value the agent yields."""
from __future__ import annotations

import uuid

import orjson
import pytest

import streamkit as faust
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def memory_app(**settings):
    name = f"snk-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     **settings)


async def test_every_kind_of_sink_gets_every_value_the_agent_yields():
    app = memory_app(agent_retries=0)
    numbers = app.channel(value_type=int)
    squares_channel = app.channel(value_type=int)
    squares_topic = app.topic("squares", value_type=int)
    from_channel, from_channel_agent, from_topic_agent, called, awaited = [], [], [], [], []

    @app.agent(squares_channel)
    async def read_channel(stream):
        async for n in stream:
            from_channel.append(n)

    @app.agent()
    async def topic_agent(stream):
        async for n in stream:
            from_topic_agent.append(n)

    @app.agent(app.channel())
    async def channel_agent(stream):
        async for n in stream:
            from_channel_agent.append(n)

    async def async_sink(value):
        awaited.append(value)

    @app.agent(numbers, sink=[squares_channel, squares_topic, topic_agent, channel_agent, called.append, async_sink])
    async def square(stream):
        async for n in stream:
            yield n * n

    async with app.running():
        for n in range(1, 6):
            await numbers.send(value=n)
        expected = [1, 4, 9, 16, 25]
        await wait_for(lambda: len(from_channel) == 5 and len(from_channel_agent) == 5 and len(from_topic_agent) == 5,
                       10, message="every sink's reader to get the five squares")
        assert (sorted(from_channel), sorted(from_channel_agent), sorted(from_topic_agent)) == (expected,) * 3
        assert called == expected and awaited == expected
        assert app.runtime.errors.counts == {"dlq": 0, "skip": 0}  # nothing went to the dead letters
        await app.runtime.checkpoint.commit()
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        assert sorted(orjson.loads(m.value) for part in broker.logs["squares"] for m in part) == expected


def test_a_sink_that_is_none_of_those_is_refused_at_declaration():
    app = memory_app()
    out = app.topic("out")
    for sink, says in ((["out"], "'out' is not a topic, channel, agent or callable"),
                       (out, "takes a list of sinks"), (print, "takes a list of sinks")):
        with pytest.raises(faust.ConfigurationError, match=says):
            @app.agent(app.channel(), sink=sink)
            async def agent(stream):
                async for value in stream:
                    yield value
