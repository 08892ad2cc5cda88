"""Agents end to end on a real broker process, once per driver."""
import asyncio
from collections import defaultdict

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.partitioner.default import murmur2

import streamkit as sk
from streamkit.runtime.dead_letters import HEADER_ERROR, HEADER_OFFSET, HEADER_STAGE, HEADER_TOPIC
from streamkit.testing import read_topic, wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS


class Reading(sk.Record):
    sensor: str
    seq: int
    value: float


def make_app(name, broker_address, driver, **settings):
    return sk.App(name, broker=broker_address, driver=driver, commit_interval=0.5, web_enabled=False,
                  **{**TEST_CONSUMER_SETTINGS, **settings})


async def test_10k_keyed_records_reach_the_sink_in_key_order(broker_address, driver, unique):
    app = make_app(f"e2e-{unique}", broker_address, driver)
    src = app.topic(f"e2e-in-{unique}", key_type=str, value_type=Reading, partitions=4)
    out = app.topic(f"e2e-out-{unique}", key_type=str, value_type=Reading, partitions=4)

    @app.agent(src, sink=[out])
    async def forward(stream):
        async for reading in stream:
            yield reading

    async with app.running():
        for i in range(10_000):
            key = f"sensor-{i % 50}"
            await src.send(key=key, value=Reading(key, i, i / 10))
        await app.flush()
        records = await asyncio.to_thread(read_topic, broker_address, out.name, expect=10_000, timeout=90)
    assert len(records) == 10_000
    per_key = defaultdict(list)
    for m in records:
        reading = Reading.loads(m.value())
        assert m.key().decode() == reading.sensor
        per_key[reading.sensor].append(reading.seq)
    assert all(seqs == sorted(seqs) for seqs in per_key.values())
    assert sorted(s for seqs in per_key.values() for s in seqs) == list(range(10_000))


async def test_group_by_lands_where_kafka_python_would_and_downstream_sees_all(broker_address, driver, unique):
    app = make_app(f"gb-{unique}", broker_address, driver)
    src = app.topic(f"gb-in-{unique}", key_type=str, value_type=Reading, partitions=3)
    seen = []

    @app.agent(src)
    async def by_sensor(stream):
        async for reading in stream.group_by(Reading.sensor, partitions=5):
            event = sk.current_event()
            seen.append((event.key, event.partition, reading.seq))

    async with app.running():
        for i in range(500):
            await src.send(key=str(i), value=Reading(f"s{i % 23}", i, 0.0))
        await wait_for(lambda: len(seen) == 500, 60, message="500 repartitioned records")
    assert sorted(seq for _, _, seq in seen) == list(range(500))
    for key, partition, _ in seen:
        assert partition == (murmur2(key.encode()) & 0x7FFFFFFF) % 5


async def test_malformed_records_go_to_the_dlq_and_the_worker_stays_up(broker_address, driver, unique):
    app = make_app(f"dlq-{unique}", broker_address, driver)
    src = app.topic(f"dlq-in-{unique}", key_type=str, value_type=Reading, partitions=3)
    good = []

    @app.agent(src)
    async def strict(stream):
        async for reading in stream:
            good.append(reading.seq)

    async with app.running():
        for i in range(3000):
            if i % 3 == 0:
                await app.send_raw(src.name, str(i).encode(), b'{"sensor": 1, "seq": "x"')
            else:
                await src.send(key=str(i), value=Reading("s", i, 1.0))
        await wait_for(lambda: len(good) == 2000, 60, message="2000 good records")
        await app.flush()
        dead = await asyncio.to_thread(read_topic, broker_address, app.dlq_topic_name, expect=1000, timeout=60)
        assert app.runtime is not None and app.runtime.fatal is None
    assert sorted(good) == [i for i in range(3000) if i % 3]
    assert len(dead) == 1000
    for m in dead:
        headers = dict(m.headers())
        assert headers[HEADER_STAGE] == b"decode" and headers[HEADER_TOPIC] == src.name.encode()
        assert int(headers[HEADER_OFFSET]) >= 0 and headers[HEADER_ERROR]
        assert m.value() == b'{"sensor": 1, "seq": "x"'
    assert sorted(int(m.key()) for m in dead) == list(range(0, 3000, 3))


async def test_kafka_python_interop_both_ways(broker_address, driver, unique):
    app = make_app(f"interop-{unique}", broker_address, driver)
    src = app.topic(f"interop-in-{unique}", key_type=str, value_type=dict, partitions=4)
    out = app.topic(f"interop-out-{unique}", key_type=str, value_type=dict, partitions=4)
    received = []

    @app.agent(src, sink=[out])
    async def echo(stream):
        async for event in stream.events():
            received.append((event.key, event.value, event.partition))
            yield {"echo": event.value["n"]}

    async with app.running():
        producer = KafkaProducer(bootstrap_servers=broker_address)
        for n in range(200):
            producer.send(src.name, key=f"k{n}".encode(), value=f'{{"n": {n}}}'.encode())
        producer.flush()
        producer.close()
        await wait_for(lambda: len(received) == 200, 60, message="records from kafka-python")

        def consume():
            consumer = KafkaConsumer(bootstrap_servers=broker_address, consumer_timeout_ms=20000)
            consumer.assign([TopicPartition(out.name, p) for p in range(4)])
            consumer.seek_to_beginning()
            got = []
            for m in consumer:
                got.append(m)
                if len(got) == 200:
                    break
            consumer.close()
            return got

        got = await asyncio.to_thread(consume)
    assert sorted((k, v["n"]) for k, v, _ in received) == sorted((f"k{n}", n) for n in range(200))
    for key, _, partition in received:
        assert partition == (murmur2(key.encode()) & 0x7FFFFFFF) % 4
    want = sorted((f"k{n}", f'{{"echo":{n}}}'.encode()) for n in range(200))
    assert sorted((m.key.decode(), m.value) for m in got) == want


async def test_compressed_topics_round_trip(broker_address, driver, unique):
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        app = make_app(f"cmp-{codec}-{unique}", broker_address, driver, compression=codec)
        topic = app.topic(f"cmp-{codec}-{unique}", key_type=str, value_type=Reading, partitions=2)
        await app.ensure_topics()
        for i in range(100):
            await topic.send(key=str(i), value=Reading("s", i, i * 1.5))
        await app.flush()
        await app.stop()
        records = await asyncio.to_thread(read_topic, broker_address, topic.name, expect=100, timeout=30)
        assert sorted(Reading.loads(m.value()).seq for m in records) == list(range(100)), codec


async def test_ask_through_and_concurrency_on_a_broker(broker_address, driver, unique):
    app = make_app(f"ask-{unique}", broker_address, driver)
    src = app.topic(f"ask-in-{unique}", value_type=int, partitions=3)
    handled = []

    @app.agent(src)
    async def square(stream):
        async for n in stream.through(f"ask-through-{unique}"):
            yield n * n

    @app.agent(f"conc-{unique}", concurrency=4)
    async def slow(stream):
        async for n in stream:
            await asyncio.sleep(0.01)
            handled.append(n)

    async with app.running():
        answers = await asyncio.gather(*(square.ask(n, timeout=60) for n in range(20)))
        for n in range(200):
            await slow.cast(n)
        await wait_for(lambda: len(handled) == 200, 60, message="200 records over 4 instances")
        await wait_for(lambda: sum(app.runtime.checkpoint.committed.get(tp, 0) for tp in app.runtime.assigned
                                   if tp.topic == f"conc-{unique}") == 200, 30, message="contiguous commit")
    assert answers == [n * n for n in range(20)]
    assert sorted(handled) == list(range(200))


async def test_global_table_write_is_read_on_another_worker(broker_address, driver, unique, tmp_path):
    def build(tag):
        app = make_app(f"glob-{unique}", broker_address, driver, data_dir=str(tmp_path / tag))
        return app, app.GlobalTable("flags", partitions=2)

    a, flags_a = build("a")
    b, flags_b = build("b")
    async with a.running(), b.running():
        await wait_for(lambda: a.runtime.tables.ready and b.runtime.tables.ready, 60)
        loop = asyncio.get_running_loop()
        started = loop.time()
        flags_a["feature-x"] = True
        flags_b["limit"] = 10
        await wait_for(lambda: flags_b.get("feature-x") is True and flags_a.get("limit") == 10, 60,
                       message="each worker sees the other's write")
        print(f"\n[{driver}] GlobalTable write visible on the other worker after {loop.time() - started:.2f}s "
              f"(commit_interval {a.conf.commit_interval}s, fetch {a.conf.fetch_timeout}s)")
