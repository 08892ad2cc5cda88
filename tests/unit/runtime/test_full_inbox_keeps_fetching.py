"""An agent that takes no records must not stop the worker's other agents.

The router awaited each subscriber's bounded inbox, so once one agent's inbox was full (the agent
slow, or waiting on something) the consume loop stopped: no topic was fetched any more, the
worker's other agents starved, and a rebalance the group started was answered only when the
stuck agent drained. A full inbox now pauses its partitions at the consumer (Kafka Streams'
and Faust's flow control) and the loop goes on; they are read again once the agent drains."""
from __future__ import annotations

import asyncio
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP


def make_app() -> sk.App:
    name = f"inbox-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False,
                  stream_buffer_batches=2, fetch_max_records=5)


async def test_a_stuck_agent_does_not_starve_the_others_and_is_read_again_once_it_drains():
    app = make_app()
    slow = app.topic("slow", key_type=str, value_type=int, partitions=1)
    fast = app.topic("fast", key_type=str, value_type=int, partitions=2)
    gate = asyncio.Event()
    taken: list[int] = []
    counted: list[int] = []

    @app.agent(slow)
    async def stuck(stream):
        async for value in stream:
            await gate.wait()  # holds its first record until the test opens the gate
            taken.append(value)

    @app.agent(fast)
    async def count(stream):
        async for value in stream:
            counted.append(value)

    async with app.running():
        for i in range(200):  # 40 batches of 5: far more than the stuck agent's inbox holds (2)
            await slow.send(key=f"k{i % 7}", value=i)

        async def fetched_past_the_inbox() -> bool:  # one batch in the agent's hand, two in its inbox
            position = await app.runtime.consumer.position(TP("slow", 0))
            return position is not None and position >= 15

        await wait_for(fetched_past_the_inbox, 10, message="the stuck agent's inbox filled")
        for i in range(100):
            await fast.send(key=f"k{i % 7}", value=i)
        await wait_for(lambda: len(counted) == 100, 10, message="the other agent's 100 records, past the stuck one")
        assert len(taken) == 0  # the stuck agent really held everything meanwhile
        paused = app.runtime.tasks.partitions.paused()
        assert paused and all(tp.topic == "slow" for tp in paused), paused  # flow control, not a blocked loop
        gate.set()
        await wait_for(lambda: len(taken) == 200, 20, message="all 200 once the stuck agent drains")
        await wait_for(lambda: not app.runtime.tasks.partitions.paused(), 5, message="no partition left paused")
    assert sorted(taken) == list(range(200))


async def test_a_stream_that_keeps_taking_records_is_not_paused_at_the_consumer():
    """A pause makes librdkafka drop what it prefetched for the partition, and a resume came
    0.2-1.1 s before its records did on Apache Kafka 4.1: a stream slower than the fetch (every
    stream under load) was paused each time its inbox filled and stood idle after each resume,
    a fifth of a stateless run. With every reading stream at its bound, the loop now waits for
    room before it fetches again; only a stream that takes nothing for a fetch timeout gets its
    partitions paused (the test above)."""
    app = make_app()
    steady = app.topic("steady", key_type=str, value_type=int, partitions=1)
    taken: list[int] = []

    @app.agent(steady)
    async def keep_up(stream):
        async for value in stream:
            await asyncio.sleep(0.001)  # slower than the fetch, never stuck
            taken.append(value)

    async with app.running():
        pauses: list[tuple[str, list[TP]]] = []
        ledger = app.runtime.router.pauses
        hold = ledger.hold

        def recording_hold(reason, tps):
            pauses.append((reason, list(tps)))
            return hold(reason, tps)

        ledger.hold = recording_hold
        for i in range(200):  # 40 batches of 5, the inbox holds 2
            await steady.send(key=f"k{i % 7}", value=i)
        await wait_for(lambda: len(taken) == 200, 20, message="all 200 records taken")
    assert sorted(taken) == list(range(200))
    full = [(reason, tps) for reason, tps in pauses if "inbox" in reason]
    assert full == [], f"paused while the stream kept taking records: {full}"
