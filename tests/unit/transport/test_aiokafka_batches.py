# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""The aiokafka producer's batched untracked sends: placed as Kafka's partitioner places them,
handed to aiokafka in order per partition, after linger or once full, all of them at a flush,
none of an aborted transaction, and a failed hand-over or delivery fails the next flush."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.structs import RecordMetadata, TopicPartition

from streamkit.errors import TransactionAborted
from streamkit.transport import aiokafka_batches
from streamkit.transport.aiokafka_batches import BatchedSends
from streamkit.transport.partitioner import partition_for_key
from streamkit.transport.pending import DeliveryFailed, PendingDeliveries


class FakeBuilder:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, *, timestamp, key, value, headers):
        if len(self.records) >= self.capacity or (value is not None and len(value) > 1000):
            return None
        self.records.append((key, value))
        return SimpleNamespace(offset=len(self.records) - 1, timestamp=timestamp)

    def record_count(self) -> int:
        return len(self.records)

    def close(self) -> None:
        self.closed = True


class FakeAiokafka:
    """create_batch / send_batch and the cluster metadata BatchedSends reads."""

    def __init__(self, partitions: int = 4, capacity: int = 3) -> None:
        cluster = SimpleNamespace(_last_successful_refresh_ms=1,
                                  partitions_for_topic=lambda topic: set(range(partitions)),
                                  available_partitions_for_topic=lambda topic: set(range(partitions)))
        self.tracked_topics: set[str] = set()  # those aiokafka's metadata refreshes ask for
        self.client = SimpleNamespace(cluster=cluster, add_topic=self.tracked_topics.add)
        self.capacity = capacity
        self.sent: list[tuple[str, int, list]] = []
        self.fail_with: BaseException | None = None
        self.deliveries: list[asyncio.Future] = []

    def create_batch(self) -> FakeBuilder:
        return FakeBuilder(self.capacity)

    async def send_batch(self, builder: FakeBuilder, topic: str, *, partition: int) -> asyncio.Future:
        await asyncio.sleep(0)  # a hand-over yields (aiokafka waits for metadata and room)
        if self.fail_with is not None:
            raise self.fail_with
        assert builder.closed  # handed over closed: aiokafka would linger on an open one again
        assert topic in self.tracked_topics  # else a metadata refresh can drop it (keep_in_metadata)
        base = len(self.values(partition))  # the partition's log so far
        self.sent.append((topic, partition, builder.records))
        fut = asyncio.get_running_loop().create_future()
        self.deliveries.append(fut)
        fut.set_result(RecordMetadata(topic, partition, TopicPartition(topic, partition), base, -1, 0, 0))
        return fut

    def values(self, partition: int) -> list[bytes]:
        return [value for _, p, records in self.sent if p == partition for _, value in records]


async def test_records_are_placed_by_kafkas_partitioner_and_keep_their_order_per_partition():
    client = FakeAiokafka(capacity=3)
    batches = BatchedSends(client, linger_ms=5, pending=PendingDeliveries())
    for i in range(40):
        assert batches.try_add("out", f"user-{i % 5}".encode(), str(i).encode(), None, None, None)
    await batches.hand_over()
    for partition in range(4):
        expected = [str(i).encode() for i in range(40) if partition_for_key(f"user-{i % 5}".encode(), 4) == partition]
        assert client.values(partition) == expected
    assert sum(len(records) for *_, records in client.sent) == 40
    assert not batches.queued
    await batches.stop()


async def test_an_open_batch_goes_out_after_linger_without_a_flush():
    client = FakeAiokafka(capacity=100)
    batches = BatchedSends(client, linger_ms=5, pending=PendingDeliveries())
    assert batches.try_add("out", b"k", b"v", 0, None, None)
    deadline = asyncio.get_running_loop().time() + 5
    while not client.sent:
        assert asyncio.get_running_loop().time() < deadline, "the lingering batch was never handed over"
        await asyncio.sleep(0.001)
    assert client.sent == [("out", 0, [(b"k", b"v")])]
    await batches.stop()


async def test_an_aborted_transactions_queued_records_are_dropped():
    client = FakeAiokafka(capacity=2)
    batches = BatchedSends(client, linger_ms=10_000, pending=PendingDeliveries())
    for i in range(5):
        batches.try_add("out", b"k", str(i).encode(), 1, None, None)
    batches.discard()
    batches.try_add("out", b"k", b"after", 1, None, None)
    await batches.hand_over()
    assert client.values(1) == [b"after"]
    await batches.stop()


async def test_a_failed_hand_over_fails_the_next_flush():
    client = FakeAiokafka(capacity=100)
    pending = PendingDeliveries()
    batches = BatchedSends(client, linger_ms=0, pending=pending)
    client.fail_with = RuntimeError("broker said no")
    batches.try_add("out", b"k", b"v", 0, None, None)
    deadline = asyncio.get_running_loop().time() + 5
    while not len(pending):
        assert asyncio.get_running_loop().time() < deadline, "the failure was not kept"
        await asyncio.sleep(0.001)
    with pytest.raises(DeliveryFailed, match="broker said no"):
        await pending.settle()
    await batches.stop()


async def test_what_cannot_be_batched_takes_aiokafkas_send():
    client = FakeAiokafka(capacity=2)
    batches = BatchedSends(client, linger_ms=10_000, pending=PendingDeliveries())
    assert not batches.try_add("out", b"k", b"x" * 2000, 0, None, None)  # larger than a batch
    client.client.cluster.partitions_for_topic = lambda topic: None
    client.client.cluster._last_successful_refresh_ms = 2
    assert not batches.try_add("new-topic", b"k", b"v", None, None, None)  # no metadata yet
    await batches.stop()


async def test_too_many_full_batches_waiting_makes_senders_wait(monkeypatch):
    monkeypatch.setattr(aiokafka_batches, "MAX_QUEUED_BYTES", 2 * 16384)  # two batches of 16 KiB
    client = FakeAiokafka(capacity=1)
    batches = BatchedSends(client, linger_ms=10_000, pending=PendingDeliveries())
    accepted = [batches.try_add("out", b"k", str(i).encode(), 0, None, None) for i in range(4)]
    assert accepted == [True, True, True, False]  # two full, one open, then the caller must wait
    await batches.hand_over()
    assert client.values(0) == [b"0", b"1", b"2"]
    await batches.stop()
    monkeypatch.undo()  # the same 4 MiB whatever a batch holds: 256 of 16 KiB, 16 of 256 KiB
    assert [BatchedSends(client, 5, PendingDeliveries(), size).max_queued for size in (16384, 262144)] == [256, 16]


async def test_a_tracked_send_gets_its_own_offset_from_its_batchs_delivery():
    client = FakeAiokafka(capacity=2)
    batches = BatchedSends(client, linger_ms=10_000, pending=PendingDeliveries())
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(5)]
    for i, fut in enumerate(futures):
        assert batches.try_add("out", b"k", str(i).encode(), 3, None, 1_000 + i, fut)
    await batches.hand_over()
    results = [await fut for fut in futures]
    assert [(r.partition, r.offset, r.timestamp) for r in results] == [(3, i, 1_000 + i) for i in range(5)]


async def test_tracked_sends_of_an_aborted_transaction_fail_and_a_failed_hand_over_fails_them():
    client = FakeAiokafka(capacity=10)
    batches = BatchedSends(client, linger_ms=10_000, pending=PendingDeliveries())
    loop = asyncio.get_running_loop()
    aborted, failed = loop.create_future(), loop.create_future()
    batches.try_add("out", b"k", b"a", 0, None, None, aborted)
    batches.discard()
    with pytest.raises(TransactionAborted):
        await aborted
    batches.try_add("out", b"k", b"b", 0, None, None, failed)
    client.fail_with = RuntimeError("no leader")
    with pytest.raises(RuntimeError, match="no leader"):
        await batches.hand_over()
    with pytest.raises(RuntimeError, match="no leader"):
        await failed
    await batches.stop()


async def test_the_aiokafka_producer_builds_batches_of_256_kib_unless_the_user_says_otherwise():
    """aiokafka moves one batch per partition per round trip (one request in flight per broker):
    at its own 16 KiB a backlog of 100-byte records took a round trip per ~150 records."""
    import streamkit as sk
    from streamkit.transport.aiokafka_driver import AiokafkaProducer

    def room(producer: AiokafkaProducer) -> int:
        builder = producer._client.create_batch()
        fits = 0
        while builder.append(timestamp=None, key=b"user-1", value=b"x" * 100, headers=[]) is not None:
            fits += 1
        return fits

    default = AiokafkaProducer(sk.App("batch-size").conf)
    mine = AiokafkaProducer(sk.App("batch-size", producer_config={"max_batch_size": 16384}).conf)
    try:
        assert room(default) > 1500  # 256 KiB of ~110-byte records; aiokafka's own default holds ~140
        assert 100 < room(mine) < 200
    finally:
        for producer in (default, mine):
            await producer._client.stop()  # never started: only marks it closed
