"""The confluent consumer runs group operations (pause, resume, seek, commit) on its fetch thread,
in the order they were asked, whether they run after a fetch or inline while a rebalance
callback blocks that thread. A pause queued behind a fetch and a resume asked inline during
the rebalance that fetch ran into once ran resume-then-pause: the partition stayed paused for
good (a chaos run with 20 SIGKILLs on Apache Kafka stalled that way)."""
from __future__ import annotations

import asyncio
import threading

from streamkit import Settings
from streamkit.transport.base import TP
from streamkit.transport.confluent_driver import ConfluentConsumer


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def pause(self, parts):
        self.calls.append(("pause", [p.partition for p in parts]))

    def resume(self, parts):
        self.calls.append(("resume", [p.partition for p in parts]))


async def test_a_pause_queued_behind_a_fetch_runs_before_a_resume_asked_during_its_rebalance():
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), "group")
    consumer._loop = asyncio.get_running_loop()
    client = consumer._client = RecordingClient()
    fetching, fetch_done = threading.Event(), threading.Event()
    consumer._fetch_pool.submit(lambda: (fetching.set(), fetch_done.wait(10)))  # a fetch in progress
    assert await asyncio.to_thread(fetching.wait, 10)
    consumer.pause([TP("t", 0)])  # queued: runs after the fetch
    consumer._rebalancing = True  # the fetch ran into a rebalance; its callback now blocks the thread
    consumer.resume([TP("t", 0)])  # asked during the callback: runs inline
    fn, result = consumer._inline_calls.get_nowait()  # what the callback's loop runs
    consumer._run_inline(consumer._loop, fn, result)
    consumer._rebalancing = False
    fetch_done.set()
    await asyncio.to_thread(consumer._fetch_pool.submit(lambda: None).result, 10)  # the pool's turn ran
    assert client.calls == [("pause", [0]), ("resume", [0])]
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()


async def test_an_awaited_group_call_gets_its_result_in_order_after_queued_ones():
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), "group")
    consumer._loop = asyncio.get_running_loop()
    client = consumer._client = RecordingClient()
    consumer.pause([TP("t", 1)])
    value = await consumer._on_fetch_thread(lambda: client.calls.append(("seek", [1])) or "sought")
    assert value == "sought"
    assert client.calls == [("pause", [1]), ("seek", [1])]
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()
