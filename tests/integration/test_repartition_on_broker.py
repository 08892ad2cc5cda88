"""group_by's repartition topic on a broker: records of any age are kept until processed (no
time retention), then the worker deletes them below the group's committed offsets."""
import asyncio
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS


class Reading(sk.Record):
    sensor: str
    seq: int


def topic_config(broker: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": broker})
    resource = ConfigResource("topic", topic)
    return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(15).items()}


def log_starts(broker: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "repartition-watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[0]
                for p in range(partitions)]
    finally:
        consumer.close()


async def test_a_month_old_replay_through_group_by_is_kept_until_processed_then_purged(broker_address, driver, unique,
                                                                                      capabilities):
    app = sk.App(f"rp-{unique}", broker=broker_address, driver=driver, commit_interval=0.5, web_enabled=False,
                 repartition_purge_interval=0.5, **TEST_CONSUMER_SETTINGS)
    source = app.topic(f"rp-in-{unique}", key_type=str, value_type=Reading, partitions=2)
    seen: list[tuple[int, float]] = []

    @app.agent(source)
    async def by_sensor(stream):
        async for reading in stream.group_by(Reading.sensor):
            seen.append((reading.seq, sk.current_event().message.timestamp))

    repartition = f"rp-{unique}-by_sensor-sensor-repartition"
    month_ago = time.time() - 30 * 86400
    async with app.running():
        assert (await asyncio.to_thread(topic_config, broker_address, repartition))["retention.ms"] == "-1"
        for i in range(500):
            await source.send(key=str(i), value=Reading(f"s{i % 7}", i), timestamp=month_ago + i)
        await wait_for(lambda: len(seen) == 500, 60, message="500 re-keyed records processed")
        assert sorted(seq for seq, _ in seen) == list(range(500))
        assert all(abs(ts - (month_ago + seq)) < 0.002 for seq, ts in seen)  # the repartition kept their times
        deletes, why = capabilities.check("delete_records")
        if deletes:
            async def purged() -> bool:
                return sum(await asyncio.to_thread(log_starts, broker_address, repartition, 2)) == 500

            deadline = time.monotonic() + 30
            while not await purged():
                assert time.monotonic() < deadline, f"the repartition topic was not purged: {app.runtime.purge.purged}"
                await asyncio.sleep(0.25)
        else:
            assert app.runtime.purge.purged == {}, why  # refused, and said so: nothing counted as purged


async def test_a_repartition_topic_created_with_time_retention_is_named_at_start(broker_address, driver, unique,
                                                                                  caplog):
    from confluent_kafka.admin import NewTopic

    app = sk.App(f"rpw-{unique}", broker=broker_address, driver=driver, commit_interval=0.5, web_enabled=False,
                 **TEST_CONSUMER_SETTINGS)
    source = app.topic(f"rpw-in-{unique}", key_type=str, value_type=Reading, partitions=2)
    seen: list[int] = []

    @app.agent(source)
    async def by_sensor(stream):
        async for reading in stream.group_by(Reading.sensor):
            seen.append(reading.seq)

    repartition = f"rpw-{unique}-by_sensor-sensor-repartition"
    admin = AdminClient({"bootstrap.servers": broker_address})  # as an older streamkit created it
    admin.create_topics([NewTopic(repartition, 2, 1, config={"retention.ms": "604800000"})])[repartition].result(15)
    async with app.running():
        await source.send(key="1", value=Reading("s1", 1))
        await wait_for(lambda: seen == [1], 60, message="the record processed")
    drift = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and repartition in r.getMessage()]
    assert len(drift) == 1 and "retention.ms=604800000" in drift[0], drift


async def test_filter_then_group_by_counts_per_new_key_and_commits_the_dropped_records(broker_address, driver, unique):
    """Faust's order (filter, then group_by): only what passes is re-keyed, every source record commits."""
    from tests.helpers import committed_total

    app = sk.App(f"rpf-{unique}", broker=broker_address, driver=driver, commit_interval=0.5, web_enabled=False,
                 **TEST_CONSUMER_SETTINGS)
    source = app.topic(f"rpf-in-{unique}", key_type=str, value_type=Reading, partitions=2)
    counts: dict[str, int] = {}

    @app.agent(source)
    async def odd_by_sensor(stream):
        async for reading in stream.filter(lambda r: r.seq % 2).group_by(Reading.sensor):
            assert sk.current_event().key == reading.sensor
            counts[reading.sensor] = counts.get(reading.sensor, 0) + 1

    expected: dict[str, int] = {}
    for i in range(1, 200, 2):
        expected[f"s{i % 5}"] = expected.get(f"s{i % 5}", 0) + 1
    async with app.running():
        assert f"rpf-{unique}-odd_by_sensor-sensor-repartition" in app.runtime.topology.subscribed
        for i in range(200):
            await source.send(key=str(i), value=Reading(f"s{i % 5}", i))
        await wait_for(lambda: counts == expected, 60, message="the counts per sensor")

        async def all_committed() -> bool:
            return await asyncio.to_thread(committed_total, broker_address, app.id, source.name, 2) == 200

        await wait_for(all_committed, 30, interval=0.5, message="all 200 source records committed")
