# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Partitions lost with the group session are dropped without a checkpoint (at-least-once).

A worker whose session expired (a broker outage, a frozen process) had its partitions revoked
with a commit: the commit waited for the broker to come back only to be refused (the member's
generation is gone), and the checkpoint's changelog records of its write cache landed after the
new owner's, for keys it had meanwhile written (Kafka Streams closes such tasks dirty).
"""
from __future__ import annotations

import asyncio
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker


def _app(tmp_path, **settings):
    name = f"lost-{uuid.uuid4().hex[:6]}"
    # no periodic checkpoint during the test (~2 s): whether one ran must be the callbacks' doing
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path), topic_partitions=2, commit_interval=25, **settings)
    numbers = app.topic("numbers", key_type=str, value_type=int, partitions=2)
    totals = app.Table("totals", default=int, partitions=2)

    @app.agent(numbers)
    async def add(stream):
        async for key, value in stream.items():
            totals[key] += value

    return app, numbers, totals


def _ready(table) -> bool:
    return len(table.local) == 2 and all(part.ready for part in table.local.values())


def _keys_of(app, numbers):
    """A key of each partition (Kafka's murmur2 placement, as the table's)."""
    from streamkit.transport.partitioner import partition_for_key

    keys: dict[int, str] = {}
    for i in range(100):
        keys.setdefault(partition_for_key(f"k{i}".encode(), 2), f"k{i}")
    return keys


async def _one_record_in_each_partition(app, numbers, totals, keys) -> None:
    """Once both partitions are served: a record to each, processed (its sum in the write cache)."""
    await wait_for(lambda: len(app.runtime.assigned) == 2 and _ready(totals), 10, message="both partitions assigned")
    for number, key in keys.items():
        await numbers.send(key=key, value=5, partition=number)
    await wait_for(lambda: all(totals.local[n].cache.get(k.encode()) == 5 for n, k in keys.items()), 10,
                   message="both records processed")


async def test_lost_partitions_are_dropped_without_a_checkpoint_revoked_ones_are_checkpointed(tmp_path):
    app, numbers, totals = _app(tmp_path)
    keys = _keys_of(app, numbers)
    async with app.running():
        runtime, broker = app.runtime, MemoryBroker.named(app.conf.bootstrap_servers)
        await _one_record_in_each_partition(app, numbers, totals, keys)
        changelog = totals.changelog.name

        def written(number):  # the keys of the changelog records in partition ``number``
            return {m.key for m in broker.logs.get(changelog, [[], []])[number]}

        def committed(number):
            return broker.committed.get(app.id, {}).get(TP(numbers.name, number))

        await runtime.ownership.on_lost([TP(numbers.name, 1)])
        assert TP(numbers.name, 1) not in runtime.assigned
        assert 1 not in totals.local  # its table partition dropped: the next owner restores it
        # the positive marker: a revocation checkpoints (every table change still cached goes)
        await runtime.ownership.on_revoked([TP(numbers.name, 0)])
        assert committed(0) == 1 and keys[0].encode() in written(0), written(0)
        assert committed(1) is None  # nothing committed for the lost partition
        assert keys[1].encode() not in written(1), written(1)  # nor its table's cached write


async def test_a_checkpoint_while_lost_partitions_finish_their_records_sends_none_of_their_writes(tmp_path):
    app, numbers, totals = _app(tmp_path)
    keys = _keys_of(app, numbers)
    async with app.running():
        runtime, broker = app.runtime, MemoryBroker.named(app.conf.bootstrap_servers)
        await _one_record_in_each_partition(app, numbers, totals, keys)
        gate = asyncio.Event()
        real_release = runtime.ownership.release

        async def slow_release(tps, timeout, *, commit=True):  # a record of it still being processed
            await gate.wait()
            await real_release(tps, timeout, commit=commit)

        runtime.ownership.release = slow_release
        losing = asyncio.create_task(runtime.ownership.on_lost([TP(numbers.name, 1)]))
        await asyncio.sleep(0.05)
        await runtime.commit()  # the periodic checkpoint, meanwhile
        gate.set()
        await asyncio.wait_for(losing, 10)
        written = {(m.partition, m.key) for part in broker.logs[totals.changelog.name] for m in part}
        assert (0, keys[0].encode()) in written  # the positive marker: the checkpoint ran
        assert (1, keys[1].encode()) not in written


async def test_lost_partitions_under_exactly_once_still_go_through_the_checkpoint(tmp_path):
    """Exactly-once keeps the revocation's path: the unit's transaction holds the lost
    partitions' outputs, and only its commit (refused by a real group, which rolls it back) or
    abort settles it; dropping the partitions alone would leave it open."""
    app, numbers, totals = _app(tmp_path, processing_guarantee="exactly_once")
    keys = _keys_of(app, numbers)
    async with app.running():
        runtime = app.runtime
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        await wait_for(lambda: len(runtime.assigned) == 2 and _ready(totals), 10, message="both partitions assigned")
        broker.append(numbers.name, keys[1].encode(), b"5", 1, None, None)  # an input from outside the app
        await wait_for(lambda: totals.local[1].cache.get(keys[1].encode()) == 5, 10, message="the record processed")
        await runtime.ownership.on_lost([TP(numbers.name, 1)])
        assert TP(numbers.name, 1) not in runtime.assigned
        assert broker.committed.get(app.id, {}).get(TP(numbers.name, 1)) == 1


class SubscribingClient:
    """librdkafka's consumer, as far as ``subscribe`` goes: it keeps the callbacks."""

    def __init__(self) -> None:
        self.callbacks: dict[str, object] = {}

    def subscribe(self, topics, **callbacks):
        self.callbacks = callbacks


def _subscribe_recording(consumer) -> list[tuple[str, list[TP]]]:
    """Subscribe ``consumer`` with callbacks that note which one was called, with what."""
    calls: list[tuple[str, list[TP]]] = []

    def recording(kind):
        async def callback(tps):
            calls.append((kind, tps))
        return callback

    consumer.subscribe(["t"], recording("assigned"), recording("revoked"), recording("lost"))
    return calls


async def test_the_confluent_driver_hands_librdkafkas_lost_partitions_to_the_lost_callback():
    from confluent_kafka import TopicPartition

    from streamkit import Settings
    from streamkit.transport.confluent_driver import ConfluentConsumer

    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), "group")
    consumer._loop = asyncio.get_running_loop()
    client = consumer._client = SubscribingClient()
    calls = _subscribe_recording(consumer)
    await asyncio.to_thread(client.callbacks["on_lost"], client, [TopicPartition("t", 3)])
    await asyncio.to_thread(client.callbacks["on_revoke"], client, [TopicPartition("t", 1)])
    assert calls == [("lost", [TP("t", 3)]), ("revoked", [TP("t", 1)])]
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()


async def test_the_aiokafka_driver_calls_a_revocation_after_its_generation_was_reset_lost():
    """aiokafka has no lost callback: a revocation once the coordinator reset the member's
    generation (the group answered that the member is unknown or stale) is one."""
    from aiokafka import TopicPartition
    from aiokafka.protocol.commit import OffsetCommitRequest

    from streamkit import Settings
    from streamkit.transport.aiokafka_driver import AiokafkaConsumer

    consumer = AiokafkaConsumer(Settings(broker="127.0.0.1:9"), "group")
    calls = _subscribe_recording(consumer)
    listener = consumer._subscription[1]
    coordinator = type("Coordinator", (), {"generation": 7})()
    consumer._client._coordinator = coordinator
    await listener.on_partitions_revoked({TopicPartition("t", 1)})  # a rebalance: the generation holds
    coordinator.generation = OffsetCommitRequest.DEFAULT_GENERATION_ID  # reset by the group's answer
    await listener.on_partitions_revoked({TopicPartition("t", 3)})
    await listener.on_partitions_revoked(set())  # the first join: nothing to revoke
    assert calls == [("revoked", [TP("t", 1)]), ("lost", [TP("t", 3)]), ("revoked", [])]
