"""Settings users turn on, exercised on a broker: auto_offset_reset="latest" and standby replicas."""
from __future__ import annotations

import asyncio

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS
from tests.helpers import word_counter


def make_app(name, broker_address, driver, **settings):
    return sk.App(name, broker=broker_address, driver=driver, web_enabled=False, **{**TEST_CONSUMER_SETTINGS, **settings})


def produce_one_by_one(address: str, topic: str, values: list[bytes]) -> None:
    """Each record its own batch: the dev broker's "latest" offset is the last batch's base + 1."""
    producer = Producer({"bootstrap.servers": address, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, partition=0)
        producer.flush(15)


async def test_auto_offset_reset_latest_starts_after_what_was_there(broker_address, driver, unique):
    app = make_app(f"latest-{unique}", broker_address, driver, auto_offset_reset="latest")
    events = app.topic(f"latest-in-{unique}", partitions=1)
    seen: list[bytes] = []

    @app.agent(events)
    async def collect(stream):
        async for value in stream:
            seen.append(value)

    admin = AdminClient({"bootstrap.servers": broker_address})  # the topic exists, written by others
    admin.create_topics([NewTopic(events.name, 1, 1)])[events.name].result(15)
    await asyncio.to_thread(produce_one_by_one, broker_address, events.name, [b'"before-1"', b'"before-2"'])
    async with app.running():
        await wait_for(lambda: app.runtime.assigned, 30, message="the group assigned the partition")
        # The position is resolved ("latest") at the first fetch after the assignment: a marker
        # sent before that is skipped too, so send markers until one arrives.
        for attempt in range(30):
            await asyncio.to_thread(produce_one_by_one, broker_address, events.name, [f'"after-{attempt}"'.encode()])
            try:
                await wait_for(lambda: seen, 1.0)
                break
            except TimeoutError:
                continue
        await wait_for(lambda: seen, 1.0, message="a record sent after the start")
    assert seen and all(v.startswith("after-") for v in seen), seen  # nothing from before the start


async def test_standby_replicas_on_a_broker_make_a_failover_replay_only_the_tail(broker_address, driver, unique, tmp_path):
    name = f"standby-{unique}"

    def worker(tag):
        app = make_app(name, broker_address, driver, table_standby_replicas=1, data_dir=str(tmp_path / tag))
        words, counts, seen = word_counter(app, f"standby-words-{unique}", partitions=4)
        return app, words, counts, seen

    a, words, counts_a, seen_a = worker("a")
    b, _, counts_b, seen_b = worker("b")
    async with a.running():
        async with b.running():
            await wait_for(lambda: a.runtime.assigned and b.runtime.assigned and a.runtime.tables.ready
                           and b.runtime.tables.ready, 60, message="both workers own partitions")
            for i in range(400):
                await words.send(key=f"w{i % 40}", value="x")
            await a.flush()
            await wait_for(lambda: len(seen_a) + len(seen_b) == 400, 60, message="every record counted")
            owned_by_b = {tp.partition for tp in b.runtime.assigned if tp.topic == words.name}
            assert owned_by_b, "b owns some of the words"
            keys_of_b = [f"w{i}" for i in range(40) if counts_b.partition_of(f"w{i}".encode()) in owned_by_b]
            standby = a.runtime.tables.tailer
            await wait_for(lambda: standby is not None and standby.applied >= len(keys_of_b), 30,
                           message="a's standby copies of b's partitions caught up")
            before = a.runtime.tables.replayed_total
        # b left: a takes over b's partitions from its warm standby copies
        await wait_for(lambda: len(counts_a) == 40 if a.runtime.tables.ready else False, 60,
                       message="a serves every key after the failover")
        assert dict(counts_a.items()) == {f"w{i}": 10 for i in range(40)}
        # every key of b has at least one changelog record: replaying fewer means the copies were warm
        assert a.runtime.tables.replayed_total - before < len(keys_of_b), "a replayed b's whole changelog"
