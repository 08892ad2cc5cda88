# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""The librdkafka producer's flush waits for the records sent before it, not for an empty queue.

librdkafka's own flush waits until nothing is queued, which sends racing it keep from coming:
a checkpoint had to stop every stream while it flushed. Each untracked record now reports to
the count it was sent under; a flush waits for its count only, and reports its failures only.
No broker: the bootstrap address refuses connections, so every record fails at
``message.timeout.ms``, and which flush reports which failure is what is tested.
"""
import asyncio

import pytest

import streamkit as sk
from streamkit.transport.confluent_producer import ConfluentProducer
from streamkit.transport.pending import DeliveryFailed


def unreachable_producer() -> ConfluentProducer:
    conf = sk.App("flush-count", broker="127.0.0.1:1", producer_config={"message.timeout.ms": 1500}).conf
    return ConfluentProducer(conf)


async def test_a_flush_reports_the_records_sent_before_it_and_leaves_later_ones_to_the_next():
    producer = unreachable_producer()
    await producer.start()
    try:
        assert producer.try_send("t", b"k", b"before")
        flush = asyncio.create_task(producer.flush())
        await asyncio.sleep(0)  # the flush has taken its count
        assert producer.try_send("t", b"k", b"after-1")
        await producer.send("t", b"k", b"after-2", track=False)
        with pytest.raises(DeliveryFailed, match=r"^1 record\(s\) not delivered to t \(1\)"):
            await asyncio.wait_for(flush, 20)
        with pytest.raises(DeliveryFailed, match=r"^2 record\(s\) not delivered to t \(2\)"):
            await asyncio.wait_for(producer.flush(), 20)
        await asyncio.wait_for(producer.flush(), 1)  # nothing sent since: nothing to wait for or report
    finally:
        await producer.stop()


async def test_sends_pass_librdkafka_their_arguments_by_position_where_each_belongs():
    """try_send and send call ``produce`` positionally (a keyword cost ~0.4 µs a record): the
    callback, partition, timestamp and headers must land in the slots this confluent-kafka has."""
    import threading

    producer = unreachable_producer()
    await producer.start()
    reported: list = []
    done = threading.Event()

    def record(err, msg):  # in the poller thread
        reported.append((err, msg.topic(), msg.partition(), msg.key(), msg.value(), msg.timestamp()[1], msg.headers()))
        done.set()

    try:
        producer._count.on_delivery = record
        assert producer.try_send("t", b"k", b"v", 0, [("h", b"1")], 1_700_000_000_123)
        tracked = await producer.send("t", b"k2", b"v2", partition=0, headers=[("x", b"y")], timestamp=5)
        producer.client.purge()  # every queued record reported now, as purged
        assert await asyncio.to_thread(done.wait, 10)
        # (a purged record's report carries no timestamp or headers: test_transport.py checks
        # those slots on a broker; a value in the wrong one is a TypeError here)
        err, topic, partition, key, value = reported[0][:5]
        assert (topic, partition, key, value) == ("t", 0, b"k", b"v") and err is not None
        with pytest.raises(asyncio.CancelledError):  # its own callback: purged is rolled back, not failed
            await asyncio.wait_for(tracked, 10)
    finally:
        await producer.stop()


async def test_try_send_many_sends_until_the_queue_is_full_and_the_flush_reports_those_it_sent():
    """A columnar agent's batch goes through ``try_send_many``: what librdkafka took is counted
    (and reported by the next flush), the rest is left to the caller's waiting sends."""
    conf = sk.App("flush-many", broker="127.0.0.1:1",
                  producer_config={"message.timeout.ms": 1500, "queue.buffering.max.messages": 3}).conf
    producer = ConfluentProducer(conf)
    await producer.start()
    try:
        records = [("t", b"k", f"v{i}".encode()) for i in range(5)]
        assert producer.try_send_many(records) == 3  # the queue holds 3
        assert producer._count.sent == 3
        with pytest.raises(DeliveryFailed, match=r"^3 record\(s\) not delivered to t \(3\)"):
            await asyncio.wait_for(producer.flush(), 20)
        assert producer.try_send_many(records[3:]) == 2
        with pytest.raises(DeliveryFailed, match=r"^2 record\(s\) not delivered to t \(2\)"):
            await asyncio.wait_for(producer.flush(), 20)
    finally:
        await producer.stop()
