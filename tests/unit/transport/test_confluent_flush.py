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


async def test_try_send_many_serves_the_reports_ready_on_the_loop_thread():
    """A batch's sends end by serving the delivery reports librdkafka has ready, on the loop's
    thread: the poller thread, taking the GIL back for each report while the loop was busy,
    cost the columnar pipeline a fifth of its throughput. No poller here: only the batch's own
    call can have served them."""
    from confluent_kafka import Producer as CKProducer

    producer = unreachable_producer()
    producer._loop = asyncio.get_running_loop()
    producer._client = CKProducer(producer._conf)  # started without its poller thread
    try:
        assert producer.try_send("t", b"k", b"untracked")
        tracked = await producer.send("t", b"k", b"tracked")
        assert tracked is not None
        producer.client.purge()  # both reported now (as purged), waiting for a poll
        assert producer._count.reported == 0 and not tracked.done()
        assert producer.try_send_many([("t", b"k", b"next")]) == 1
        assert producer._count.reported == 1  # the untracked record's report, counted
        assert tracked.cancelled()  # the tracked one's future resolved (purged: cancelled)
    finally:
        producer.client.purge()
        producer.client.flush(5)


async def test_the_poller_leaves_reports_to_the_loop_for_a_while_after_the_loop_served_them(monkeypatch):
    """While the loop sends batch after batch (and serves their reports after each), the poller
    thread does not poll: every report it served would take the GIL from the busy loop."""
    import threading
    import time

    from confluent_kafka import Producer as CKProducer

    from streamkit.transport import confluent_producer

    class Recording:
        """librdkafka's producer, noting when each poll call starts on the poller thread."""

        def __init__(self, conf: dict) -> None:
            self.client = CKProducer(conf)
            self.poller_polls: list[float] = []

        def poll(self, timeout: float) -> int:
            if threading.current_thread().name == "streamkit-delivery":
                self.poller_polls.append(time.monotonic())
            return self.client.poll(timeout)

        def __getattr__(self, name: str):
            return getattr(self.client, name)

        def __len__(self) -> int:
            return len(self.client)

    monkeypatch.setattr(confluent_producer, "CKProducer", Recording)
    monkeypatch.setattr(confluent_producer, "LOOP_SERVES_FOR", 0.5)
    producer = unreachable_producer()
    await producer.start()
    recording = producer.client
    try:
        await wait_until(lambda: recording.poller_polls, "the poller polls while the loop serves nothing")
        served_at = time.monotonic()
        producer.try_send_many([("t", b"k", b"v")])  # the loop served the reports ready
        await wait_until(lambda: recording.poller_polls[-1] > served_at, "the poller polls again")
        assert recording.poller_polls[-1] >= served_at + 0.5, "the poller polled while the loop was serving"
    finally:
        producer.client.purge()
        await producer.stop()


async def wait_until(condition, message: str, deadline: float = 10.0) -> None:
    from streamkit.testing import wait_for

    await wait_for(condition, deadline, interval=0.01, message=message)


async def test_the_loop_leaves_the_reports_to_the_poller_while_it_serves_them():
    """The loop serves reports after its sends only when the poller thread is not serving them
    at that moment: the delivery callbacks count reports (``reported += 1``), and two threads
    running them together could lose a count, leaving a flush waiting for good."""
    from confluent_kafka import Producer as CKProducer

    producer = unreachable_producer()
    producer._loop = asyncio.get_running_loop()
    producer._client = CKProducer(producer._conf)  # started without its poller thread
    try:
        assert producer.try_send("t", b"k", b"untracked")
        producer.client.purge()  # reported now (as purged), waiting for a poll
        with producer._serving:  # the poller thread, in the middle of its poll
            assert producer.try_send_many([("t", b"k", b"next")]) == 1
            assert producer._count.reported == 0  # not served here meanwhile
        assert producer.try_send_many([("t", b"k", b"again")]) == 1
        assert producer._count.reported == 1  # served once the poller was out of it (marker)
    finally:
        producer.client.purge()
        producer.client.flush(5)
