"""Faust's stream operators and agent helpers, written as a Faust app writes them (the import is
the only change): ``agent.test_context()``, ``enumerate``, ``take_events``, ``echo``,
``noack``/``ack``, and the RPC helpers ``agent.join/kvjoin/map/kvmap``."""
from __future__ import annotations

import uuid

import pytest

import streamkit as faust
from streamkit.testing import wait_for
from streamkit.transport import TP


def memory_app(**settings):
    name = f"fst-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     **settings)


class Order(faust.Record):
    account: str
    amount: int


async def test_test_context_runs_the_agent_on_records_put_directly_as_in_faust():
    app = faust.App("ordering")  # no broker is contacted
    orders = app.topic("orders", value_type=Order)

    @app.agent(orders)
    async def double(stream):
        async for order in stream:
            yield order.amount * 2

    async with double.test_context() as agent:
        first = await agent.put(Order(account="a", amount=21))
        second = await agent.put(Order(account="b", amount=5), key="b")
        assert agent.results[first.message.offset] == 42
        assert agent.results[second.message.offset] == 10
        assert second.key == "b" and second.value == Order(account="b", amount=5)


async def test_test_context_raises_what_the_agent_raised_for_the_record():
    app = faust.App("failing")

    @app.agent(app.topic("numbers", value_type=int))
    async def invert(stream):
        async for n in stream:
            yield 1 / n

    async with invert.test_context() as agent:
        with pytest.raises(ZeroDivisionError):
            await agent.put(0)


async def test_enumerate_take_events_and_echo():
    app = memory_app()
    source = app.topic("source", key_type=str, value_type=int)
    copies = app.topic("copies", key_type=str, value_type=int)
    numbered, batches, copied = [], [], []

    @app.agent(source)
    async def number(stream):
        async for i, value in stream.echo(copies).enumerate(start=1):
            numbered.append((i, value))

    @app.agent(copies)
    async def in_batches(stream):
        async for events in stream.take_events(3, within=0.2):
            batches.append([(e.key, e.value, e.offset) for e in events])
            copied.extend(e.value for e in events)

    async with app.running():
        for n in (10, 20, 30):
            await source.send(key="k", value=n)
        await wait_for(lambda: len(numbered) == 3 and len(copied) == 3, 10, message="three records each")
    assert numbered == [(1, 10), (2, 20), (3, 30)]
    assert copied == [10, 20, 30] and all(key == "k" for batch in batches for key, _, _ in batch)


async def test_noack_holds_the_checkpoint_until_each_record_is_acked():
    app = memory_app(commit_interval=3600)
    source = app.topic("jobs", value_type=int, partitions=1)
    taken = []

    @app.agent(source)
    async def slow(stream):
        async for event in stream.noack().events():
            taken.append((stream, event))

    async with app.running():
        for n in range(3):
            await source.send(value=n)
        await wait_for(lambda: len(taken) == 3, 10, message="three jobs taken")
        tp = TP("jobs", 0)
        assert (await app.runtime.checkpoint.commit()).get(tp, 0) == 0  # none acked: nothing to commit
        stream = taken[0][0]
        assert stream.ack(taken[1][1])  # out of order: the first still holds the offset back
        assert (await app.runtime.checkpoint.commit()).get(tp, 0) == 0
        assert taken[0][1].ack()  # Faust's event.ack()
        assert (await app.runtime.checkpoint.commit())[tp] == 2
        assert stream.ack(taken[2][1])
        assert (await app.runtime.checkpoint.commit())[tp] == 3
        assert not stream.ack(taken[2][1])  # not held any more


async def test_join_and_map_ask_the_agent_about_each_value():
    app = memory_app()

    @app.agent(app.topic("squares", value_type=int))
    async def square(stream):
        async for n in stream:
            yield n * n

    async with app.running():
        await wait_for(lambda: app.runtime.assigned, 10, message="assigned")
        assert await square.join([1, 2, 3], timeout=10) == [1, 4, 9]
        assert await square.kvjoin([("a", 4), ("b", 5)], timeout=10) == [16, 25]
        assert sorted([r async for r in square.map([6, 7], timeout=10)]) == [36, 49]
        assert sorted([r async for r in square.kvmap([("a", 8)], timeout=10)]) == [64]


def test_event_ack_outside_a_noack_stream_says_what_it_is_for():
    from streamkit.runtime.event import Event
    from streamkit.transport.base import Message

    with pytest.raises(RuntimeError, match="stream.noack\\(\\) stream"):
        Event("k", 1, Message("t", 0, 0, b"k", b"1", [], None)).ack()



async def test_take_with_timestamp_and_refused_agent_options():
    app = memory_app()
    events = app.topic("events", partitions=1)
    got = []

    @app.agent(events)
    async def batch(stream):
        async for values in stream.take_with_timestamp(2, within=0.2, timestamp_field_name="ts"):
            got.append(values)

    for option, reason in (({"isolated_partitions": True}, r"isolated_partitions=True\) is not supported"),
                           ({"supervisor_strategy": object()}, "restarted alone"),
                           ({"use_reply_headers": False}, "routed by headers")):
        with pytest.raises(faust.ConfigurationError, match=reason):
            app.agent(events, **option)
    async with app.running():
        await events.send(value={"n": 1}, timestamp=1000.5)
        await events.send(value={"n": 2}, timestamp=1001.0)
        await wait_for(lambda: got, 10, message="one batch")
    assert got[0] == [{"n": 1, "ts": 1000.5}, {"n": 2, "ts": 1001.0}]


async def test_agent_send_and_cast_take_fausts_options_or_name_the_way():
    app = memory_app()
    numbers = app.topic("numbers", value_type=int, partitions=1)
    seen = []

    @app.agent(numbers)
    async def collect(stream):
        async for event in stream.events():
            seen.append((event.value, event.message.timestamp))

    delivered = []
    async with app.running():
        fut = await collect.send(value=1, timestamp=100.0, callback=delivered.append)
        await fut
        await collect.cast(2, timestamp=200.0)
        await wait_for(lambda: len(seen) == 2, 10, message="both records")
        assert delivered == [fut] and seen == [(1, 100.0), (2, 200.0)]
        with pytest.raises(TypeError, match="reply_to=...\\) is not supported: use agent.ask"):
            await collect.send(value=3, reply_to="elsewhere")
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
            await collect.cast(3, colour="red")
