"""On a broker that auto-creates topics (the dev broker does, with 4 partitions): a topic an app
first sends to while it runs is created with the app's settings, not the broker's."""
import asyncio

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

import streamkit as sk
from streamkit.transport import create_driver


def partitions(broker, topic):
    metadata = AdminClient({"bootstrap.servers": broker}).list_topics(timeout=10)
    found = metadata.topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


async def test_a_topic_first_sent_to_by_a_running_worker_gets_topic_partitions(broker_address, driver, unique,
                                                                                 tmp_path):
    app = sk.App(f"first-send-{unique}", broker=broker_address, driver=driver, topic_partitions=3,
                 web_enabled=False, data_dir=str(tmp_path))
    async with app.running():
        await app.topic(f"late-{unique}", value_type=int).send_and_wait(value=1)
        await app.topic(f"late-declared-{unique}", value_type=int, partitions=2).send_and_wait(value=1)
    assert partitions(broker_address, f"late-{unique}") == 3
    assert partitions(broker_address, f"late-declared-{unique}") == 2


async def test_the_confluent_producer_does_not_auto_create(broker_address, unique):
    """librdkafka's producer asks the broker not to create a missing topic: the send fails."""
    settings = sk.Settings(broker=broker_address, driver="confluent", producer_config={"message.timeout.ms": 3000})
    producer = create_driver(settings).producer()
    await producer.start()
    try:
        with pytest.raises(KafkaException, match="timed out|Unknown topic"):
            await asyncio.wait_for(await producer.send(f"missing-{unique}", None, b"x"), 30)
    finally:
        await producer.stop()
    assert partitions(broker_address, f"missing-{unique}") is None
