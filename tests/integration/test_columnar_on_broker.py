"""examples/columnar_enrich.py's columnar agent run by the worker on a real broker, once per driver:
every reading enriched under its key, a value that does not decode dead-lettered, offsets committed."""
import asyncio
import importlib.util
import uuid
from pathlib import Path

import orjson
from confluent_kafka import Producer

from streamkit.runtime.dead_letters import HEADER_STAGE, HEADER_TOPIC
from streamkit.testing import read_topic, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "columnar_enrich.py"
N = 3000


def load_example(monkeypatch, broker_address, driver, name):
    monkeypatch.setenv("STREAMKIT_BROKER", broker_address)
    monkeypatch.setenv("STREAMKIT_DRIVER", driver)
    monkeypatch.setenv("STREAMKIT_COMMIT_INTERVAL", "0.5")
    monkeypatch.setenv("STREAMKIT_WEB_ENABLED", "false")
    monkeypatch.setenv("COLUMNAR_NAME", name)
    spec = importlib.util.spec_from_file_location(f"columnar_enrich_{uuid.uuid4().hex[:6]}", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def produce(address, topic, records):
    producer = Producer({"bootstrap.servers": address, "partitioner": "murmur2_random", "linger.ms": 5})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    assert producer.flush(30) == 0


async def test_the_columnar_example_enriches_every_reading_on_the_broker(broker_address, driver, unique,
                                                                       monkeypatch):
    ex = load_example(monkeypatch, broker_address, driver, f"col-{unique}")
    records = [(f"s{i % 7}".encode(), ex.Reading(f"s{i % 7}", i, 50.0 + i % 60).dumps()) for i in range(N)]
    records.insert(1234, (b"s0", b'{"sensor": "s0", "seq": "not a number", "fahrenheit": 1.0}'))
    await ex.app.ensure_topics()
    await asyncio.to_thread(produce, broker_address, ex.readings.name, records)
    async with ex.app.running():
        out = await asyncio.to_thread(read_topic, broker_address, ex.celsius.name, expect=N, timeout=90)
        dead = await asyncio.to_thread(read_topic, broker_address, ex.app.dlq_topic_name, expect=1, timeout=30)
        await wait_for(lambda: sum(ex.app.runtime.checkpoint.committed.get(tp, 0)
                                   for tp in ex.app.runtime.checkpoint.committed) == N + 1, 30,
                       message="every offset committed")
    got = {orjson.loads(m.value())["seq"]: (m.key(), orjson.loads(m.value())) for m in out}
    assert len(out) == N and sorted(got) == list(range(N))
    for seq in (0, 1233, N - 1):
        celsius = round((50.0 + seq % 60 - 32.0) / 1.8, 2)
        assert got[seq] == (f"s{seq % 7}".encode(),
                            {"sensor": f"s{seq % 7}", "seq": seq, "celsius": celsius, "hot": celsius > 30.0})
    assert len(dead) == 1 and b"not a number" in dead[0].value()
    headers = dict(dead[0].headers())
    assert headers[HEADER_STAGE] == b"decode" and headers[HEADER_TOPIC] == ex.readings.name.encode()
