# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""stream.tee(n) and stream.combine(*streams) inside an agent, on the memory transport: every
branch gets every record, and a record counts as processed only once every branch took it past."""
from __future__ import annotations

import asyncio
import uuid

import pytest

import streamkit as faust
from streamkit.testing import wait_for
from streamkit.transport import TP


def memory_app(**settings):
    name = f"tee-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     **settings)


async def test_tee_gives_every_branch_every_record_and_combine_merges_them():
    app = memory_app()
    source = app.topic("numbers", value_type=int, partitions=1)
    seen = []

    @app.agent(source)
    async def both(stream):
        evens, tens = stream.tee(2)
        async for value in evens.map(lambda n: ("x2", n * 2)).combine(tens.map(lambda n: ("x10", n * 10))):
            seen.append(value)

    async with app.running():
        for n in (1, 2, 3):
            await source.send(value=n)
        await wait_for(lambda: len(seen) == 6, 10, message="six values")
    assert sorted(v for tag, v in seen if tag == "x2") == [2, 4, 6]
    assert sorted(v for tag, v in seen if tag == "x10") == [10, 20, 30]


async def test_a_teed_record_is_committed_only_when_every_branch_took_it_past():
    app = memory_app(commit_interval=3600)
    source = app.topic("jobs", value_type=int, partitions=1)
    fast_seen, slow_seen = [], []
    permits = asyncio.Queue()  # the slow branch finishes a record per permit

    @app.agent(source)
    async def split(stream):
        fast, slow = stream.tee(2)

        async def run_slow():
            async for value in slow:
                slow_seen.append(value)
                await permits.get()

        task = asyncio.ensure_future(run_slow())
        try:
            async for value in fast:
                fast_seen.append(value)
        finally:
            task.cancel()

    async with app.running():
        for n in range(3):
            await source.send(value=n)
        await wait_for(lambda: len(fast_seen) == 3 and len(slow_seen) == 1, 10, message="fast ahead of slow")
        tp = TP("jobs", 0)
        assert (await app.runtime.checkpoint.commit()).get(tp, 0) == 0  # slow still holds record 0
        permits.put_nowait(1)
        permits.put_nowait(1)
        await wait_for(lambda: len(slow_seen) == 3, 10, message="slow caught up")
        # the slow branch holds record 2 until it asks for the next one; the fast one is past it
        assert (await app.runtime.checkpoint.commit())[tp] == 2
        permits.put_nowait(1)
        await wait_for(lambda: permits.empty(), 10, message="slow took its permit")
        deadline = asyncio.get_running_loop().time() + 10
        while (await app.runtime.checkpoint.commit()).get(tp) != 3:
            assert asyncio.get_running_loop().time() < deadline, "record 2 never committed"
            await asyncio.sleep(0.02)
    assert fast_seen == slow_seen == [0, 1, 2]


async def test_combine_merges_an_agent_stream_with_another_iterable():
    app = memory_app()
    source = app.topic("words", value_type=str, partitions=1)
    seen = []

    @app.agent(source)
    async def merged(stream):
        async for value in stream.combine(app.stream(["extra"])):
            seen.append(value)

    async with app.running():
        await source.send(value="a")
        await source.send(value="b")
        await wait_for(lambda: len(seen) == 3, 10, message="three values")
    assert sorted(seen) == ["a", "b", "extra"]


def test_tee_and_combine_refuse_what_cannot_work():
    from streamkit.runtime.inbox import Subscriber
    from streamkit.streams.stream import Stream

    stream = Stream(Subscriber("t", 1))
    with pytest.raises(ValueError, match="at least 1"):
        stream.tee(0)
    with pytest.raises(TypeError, match="combine"):
        stream.combine(42)


async def test_a_teed_agent_that_crashes_gets_the_unfinished_records_again():
    app = memory_app()
    source = app.topic("flaky", value_type=int, partitions=1)
    seen, failed = [], []

    def once(n):
        if n == 2 and not failed:
            failed.append(n)
            raise RuntimeError("first time only")
        return ("b", n)

    @app.agent(source)
    async def flaky(stream):
        a, b = stream.tee(2)
        async for value in a.map(lambda n: ("a", n)).combine(b.map(once)):
            seen.append(value)

    async with app.running():
        for n in (1, 2, 3):
            await source.send(value=n)
        await wait_for(lambda: {("b", 1), ("b", 2), ("b", 3), ("a", 3)} <= set(seen), 10, message="all after the crash")
        assert failed == [2] and flaky.restarts >= 1


async def test_teed_branches_take_no_new_record_while_an_exactly_once_checkpoint_commits(tmp_path):
    app = memory_app(commit_interval=20, processing_guarantee="exactly_once", data_dir=str(tmp_path))
    source = app.topic("eos", value_type=int, partitions=1)
    fast_seen, slow_seen, taken_in_commit, streams = [], [], [], []
    fast_permits, slow_permits = asyncio.Queue(), asyncio.Queue()  # each branch finishes a record per permit
    # sends of an exactly-once app outside a record wait for its next commit: another app sends
    feeder = faust.App(f"{app.id}-feeder", broker=app.conf.broker, driver="memory", web_enabled=False,
                       store="memory://", data_dir=str(tmp_path / "feeder"))
    feed = feeder.topic("eos", value_type=int, partitions=1)

    @app.agent(source)
    async def split(stream):
        streams.append(stream)
        fast, slow = stream.tee(2)

        async def run_slow():
            async for value in slow:
                slow_seen.append(value)
                await slow_permits.get()

        task = asyncio.ensure_future(run_slow())
        try:
            async for value in fast:
                fast_seen.append(value)
                taken_in_commit.append(app.runtime.router.barrier.closed)
                await fast_permits.get()
        finally:
            task.cancel()

    async with feeder.running():
        for n in range(3):  # before the worker starts: one batch of three
            await feed.send_and_wait(value=n)
    async with app.running():
        await wait_for(lambda: fast_seen == [0] and slow_seen == [0], 10, message="both took record 0")
        assert len(streams[0]._batch.events) == 3
        commit = asyncio.ensure_future(app.runtime.checkpoint.commit())  # waits for record 0 to be done
        await wait_for(lambda: app.runtime.router.barrier.closed, 10, message="the checkpoint's barrier")
        for _ in range(3):
            fast_permits.put_nowait(1)
        await wait_for(lambda: fast_permits.qsize() < 3, 10, message="fast done with record 0")
        with pytest.raises(TimeoutError):  # the rest of the batch waits for the commit
            await wait_for(lambda: len(fast_seen) > 1, 0.5, message="fast took record 1 during the commit")
        assert not commit.done()
        for _ in range(3):
            slow_permits.put_nowait(1)
        await asyncio.wait_for(commit, 10)
        await wait_for(lambda: fast_seen == slow_seen == [0, 1, 2], 10, message="all three taken")
    assert not any(taken_in_commit)
