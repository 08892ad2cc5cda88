"""A counting app written the way Faust users write it, on a real broker, once per driver: the
table declares no partitions, its source topic has 6 (declared in the app, or created beforehand
by someone else), and every record is counted: nothing goes to the dead-letter topic."""
import asyncio

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import streamkit as sk
from streamkit.tables.marks import MARK_KEY
from streamkit.testing import read_topic, wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS
from streamkit.transport.partitioner import partition_for_key

USERS = [f"user-{i}" for i in range(60)]
CLICKS = 1200


class Click(sk.Record):
    user: str
    page: str


def produce_clicks(address, topic):
    """As another service would: keyed by user, Java-compatible murmur2 partitioning."""
    producer = Producer({"bootstrap.servers": address, "partitioner": "murmur2_random", "linger.ms": 5})
    for i in range(CLICKS):
        user = USERS[i % len(USERS)]
        producer.produce(topic, key=user.encode(), value=orjson.dumps({"user": user, "page": f"/p{i % 9}"}))
    assert producer.flush(30) == 0
    producer.close()


def create_topic(address, name, partitions):
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def partition_counts(address, name):
    return len(AdminClient({"bootstrap.servers": address}).list_topics(name, timeout=10).topics[name].partitions)


@pytest.mark.parametrize("source", ["declared", "existing"])
async def test_a_table_without_partitions_counts_a_six_partition_topic(broker_address, driver, unique, tmp_path,
                                                                       source):
    app = sk.App(f"clicks-{unique}", broker=broker_address, driver=driver, commit_interval=0.5, web_enabled=False,
                 data_dir=str(tmp_path), **TEST_CONSUMER_SETTINGS)
    name = f"clicks-{unique}"
    if source == "declared":
        clicks = app.topic(name, key_type=str, value_type=Click, partitions=6)
    else:  # the topic is there already, with its own count; the app does not say it
        await asyncio.to_thread(create_topic, broker_address, name, 6)
        clicks = app.topic(name, key_type=str, value_type=Click)
    counts = app.Table("counts", default=int)

    @app.agent(clicks)
    async def count(stream):
        async for click in stream:
            counts[click.user] += 1

    expected = {user: CLICKS // len(USERS) for user in USERS}
    async with app.running():
        await asyncio.to_thread(produce_clicks, broker_address, name)
        await wait_for(lambda: sum(counts.values()) >= CLICKS, 90, message="every click counted")
        assert dict(counts.items()) == expected
        assert counts.partitions == 6
    changelog = counts.changelog.name
    assert partition_counts(broker_address, changelog) == 6
    records = await asyncio.to_thread(read_topic, broker_address, changelog)
    last = {}
    for m in records:
        if m.key() == MARK_KEY:  # a checkpoint mark: one in each partition written (tables/marks.py)
            continue
        assert m.partition() == partition_for_key(m.key(), 6)
        last[m.key().decode()] = int(m.value())
    assert last == expected
    dead = await asyncio.to_thread(read_topic, broker_address, app.dlq_topic_name, timeout=10, idle=1.0)
    assert dead == []
