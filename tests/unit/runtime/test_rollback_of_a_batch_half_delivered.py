"""A rolled-back checkpoint rewinds a partition whose first batch is still being handed out.

The router counted a partition as delivered only once its batch was in every subscriber's
inbox, and a roll-back rewinds the delivered partitions. With two agents on one topic, the first
can process a partition's first batch (its outputs in the failed flush) while the put into the
second's full inbox waits: that partition was not rewound, its outputs were lost, and the next
checkpoint committed past them (at least once). The router no longer waits for a full inbox (it
pauses the partition instead), so the batch is in both inboxes at once; the roll-back must still
rewind it, and the slow agent must take only the copy read again.
"""
from __future__ import annotations

import asyncio
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker


async def test_a_rollback_rewinds_a_partition_whose_first_batch_one_agent_has_and_another_waits_for(tmp_path):
    name = f"halfdelivered-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path), topic_partitions=2)
    numbers = app.topic("numbers", key_type=str, value_type=int, partitions=2)
    copies = app.topic("copies", key_type=str, value_type=int, partitions=2)
    fast_seen: list[int] = []
    slow_seen: list[int] = []
    slow_may_go = asyncio.Event()

    @app.agent(numbers)
    async def fast(stream):
        async for value in stream:
            fast_seen.append(value)
            await copies.send_soon(key="k", value=value)

    @app.agent(numbers)
    async def slow(stream):
        async for value in stream:
            await slow_may_go.wait()
            slow_seen.append(value)

    broker = MemoryBroker.named(name)
    first_of_partition_0 = 1000
    failed: list[int] = []

    def fail_first_copy(topic, value):
        if topic == copies.name and value is not None and int(value) == first_of_partition_0 and not failed:
            failed.append(first_of_partition_0)
            return True
        return False

    broker.faults.fail_send_if = fail_first_copy

    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: len(runtime.assigned) == 2, 10, message="both partitions assigned")
        # Partition 1 fills the slow agent: one record in its hands, an inbox of twice its bound
        # (the fast agent's room keeps the loop fetching; at twice the bound the router pauses).
        for i in range(1 + 2 * app.conf.stream_buffer_batches):
            await numbers.send(key="k", value=i, partition=1)
            await wait_for(lambda: i in fast_seen, 10, message=f"partition 1's record {i} taken by the fast agent")  # noqa: B023 - called within this same iteration
        # Partition 0's first batch: the fast agent processes it, the slow one's full inbox holds it.
        await numbers.send(key="k", value=first_of_partition_0, partition=0)
        await wait_for(lambda: first_of_partition_0 in fast_seen, 10, message="partition 0's record processed once")
        assert runtime.tasks.partitions.paused().get(TP(numbers.name, 0))  # the precondition: held back by it

        async def let_slow_go_once_the_rollback_waits():
            await wait_for(lambda: runtime.router.barrier.closed, 30, message="the roll-back's barrier")
            slow_may_go.set()

        release = asyncio.create_task(let_slow_go_once_the_rollback_waits())
        await wait_for(lambda: runtime.checkpoint.rollbacks == 1, 30,
                       message="a periodic checkpoint met the failed delivery and rolled back")
        await release
        assert failed, "the copy's delivery did fail"
        await wait_for(lambda: fast_seen.count(first_of_partition_0) == 2, 10,
                       message="partition 0's record processed again after the roll-back")
        await wait_for(lambda: first_of_partition_0 in slow_seen, 10, message="the slow agent's copy of it")
        await runtime.checkpoint.commit()
        copied = [int(m.value) for log in broker.logs[copies.name] for m in log]
        assert first_of_partition_0 in copied, "the output of a record whose delivery failed was lost"
        # the batch whose put waited across the rewind is stale: the slow agent takes only the one read again
        assert slow_seen.count(first_of_partition_0) == 1, slow_seen
        assert broker.committed[app.id][TP(numbers.name, 0)] == 1
    assert runtime.fatal is None
