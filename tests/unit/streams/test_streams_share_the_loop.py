"""A stream working through a long batch lets the event loop run other tasks on the way.

Records of the batch in hand are handed out without awaiting (that is what makes a batch
cheap), and an inbox with a batch queued hands it over without suspending either: a backlog was
one run of the loop, however long, and the producer's sender, the next fetch, timers and web
views waited for its end. Counted, not timed: the other task must get turns while the agent is
between its first and its last record.
"""
import asyncio
import time
import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker

RECORDS = 400


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("kind", ["async for", "function"])
async def test_other_tasks_run_while_an_agent_works_through_a_batch(kind):
    name = f"share-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False)
    source = app.topic("in", key_type=str, value_type=int, partitions=1)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.create_topic("in", 1)
    for value in range(RECORDS):  # in the log before the worker starts: one fetched batch
        broker.append("in", b"k", str(value).encode(), 0, None, None)
    turns = [0]
    turns_at: dict[int, int] = {}

    def handle(value: int) -> None:
        if value in (0, RECORDS - 1):
            turns_at[value] = turns[0]
        busy(0.0025)  # 1 s over the batch

    if kind == "async for":
        @app.agent(source)
        async def work(values):
            async for value in values:
                handle(value)
    else:
        @app.agent(source)
        def work(value):
            handle(value)

    async def other_task() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    async with app.running():
        other = asyncio.create_task(other_task())
        try:
            await wait_for(lambda: len(turns_at) == 2, 20, message="the whole batch processed")
        finally:
            other.cancel()
    assert turns_at[RECORDS - 1] - turns_at[0] >= 5, "the agent held the event loop for the whole batch"
