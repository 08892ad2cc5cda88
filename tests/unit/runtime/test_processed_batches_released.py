"""A worker lets go of the records it has processed before the next checkpoint, not at it.

The checkpoint finds each partition's first unprocessed record in the batches a subscriber still
tracks. Batches tracked until the checkpoint pruned them kept every record of a commit interval
alive (tens of thousands at speed): memory, longer full garbage collections, and the checkpoint
freeing them all at once held the event loop for tens of milliseconds — the latency tail."""
import uuid

import streamkit as sk
from streamkit.runtime.event import Event
from streamkit.runtime.inbox import Batch, Subscriber
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.base import Message
from streamkit.transport.memory import MemoryBroker


def batch(tp: TP, first: int, count: int) -> Batch:
    return Batch(tp, [Event(None, i, Message(tp.topic, tp.partition, i, None, b"", None, None))
                      for i in range(first, first + count)])


async def test_a_subscriber_drops_finished_batches_of_a_partition_when_the_next_one_comes():
    tp, other = TP("in", 0), TP("in", 1)
    subscriber = Subscriber("test", 8)
    first, held = batch(tp, 0, 3), batch(other, 0, 3)
    await subscriber.put(first)
    await subscriber.put(held)
    first.acked = 3  # every record of it processed
    held.acked = 2  # its last record still in hand
    await subscriber.put(batch(tp, 3, 3))
    await subscriber.put(batch(other, 3, 3))
    assert [b.events[0].offset for b in subscriber.pending[tp]] == [3]
    assert [b.events[0].offset for b in subscriber.pending[other]] == [0, 3]
    assert subscriber.first_unprocessed(other) == 2
    assert subscriber.first_unprocessed(tp) == 3


async def test_records_processed_between_checkpoints_are_not_kept_until_the_checkpoint():
    name = f"rel-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=3600, web_enabled=False)
    source = app.topic("in", key_type=str, value_type=int, partitions=1)
    seen: list[int] = []

    @app.agent(source)
    async def count(values):
        async for value in values:
            seen.append(value)

    async with app.running():
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        for value in range(50):  # one fetched batch each: appended after the last was processed
            broker.append("in", b"k", str(value).encode(), 0, None, None)
            await wait_for(lambda: len(seen) == value + 1, 10, message=f"record {value} processed")  # noqa: B023 - called within this same iteration
        subscriber = app.runtime.router.routes["in"].subscribers[0]
        assert app.runtime.checkpoint.commits == 0  # no checkpoint pruned them
        assert len(subscriber.pending[TP("in", 0)]) <= 2, "processed batches are still tracked"
