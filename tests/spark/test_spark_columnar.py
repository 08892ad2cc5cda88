"""examples/columnar_enrich.py's columnar agent run by Spark (``mapInArrow``), unchanged: the
outputs the worker gives (tests/integration/test_columnar_on_broker.py), and the dead letter."""
import asyncio
import importlib
import os
import sys
import uuid
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

from streamkit.runtime.dead_letters import HEADER_STAGE
from streamkit.testing.helpers import read_topic

pytestmark = [pytest.mark.spark, pytest.mark.broker]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
N = 400


@pytest.fixture(scope="module")
def example(broker_address):
    # Set before the session starts: Spark's Python workers inherit the environment (and path) of that moment.
    os.environ["STREAMKIT_BROKER"] = broker_address
    os.environ["STREAMKIT_DRIVER"] = "confluent"
    os.environ["COLUMNAR_NAME"] = f"col-spark-{uuid.uuid4().hex[:8]}"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(EXAMPLES))
    try:
        module = importlib.reload(importlib.import_module("columnar_enrich"))
        yield module
    finally:
        sys.path.remove(str(EXAMPLES))
        for name in ("STREAMKIT_BROKER", "STREAMKIT_DRIVER", "COLUMNAR_NAME"):
            os.environ.pop(name, None)


@pytest.fixture(scope="module")
def spark(example):
    from streamkit.spark import spark_session

    session = spark_session("local[2,2]", conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "100"})
    yield session
    session.stop()


def test_the_columnar_example_runs_on_spark_unchanged(example, spark, broker_address, capabilities, tmp_path):
    app = example.app
    asyncio.run(app.ensure_topics())
    producer = Producer({"bootstrap.servers": broker_address, "partitioner": "murmur2_random"})
    partitions = app.conf.topic_partitions
    for i in range(N):
        tail = i >= N - partitions  # one lone record per partition last: even the dev broker's "latest" is exact
        producer.produce(example.readings.name, key=f"s{i % 7}".encode(),
                         value=example.Reading(f"s{i % 7}", i, 50.0 + i % 60).dumps(),
                         **({"partition": i - (N - partitions)} if tail else {}))
        if i == 123:
            producer.produce(example.readings.name, key=b"s0", value=b'{"sensor": "s0", "seq": "bad"}')
        if tail or i == N - partitions - 1:
            assert producer.flush(30) == 0
    hides_aborted, _ = capabilities.check("read_committed_hides_aborted")
    isolation = "read_committed" if hides_aborted else "read_uncommitted"

    app.spark.use(spark)
    app.spark.run("to_celsius", checkpoint=str(tmp_path / "columnar"), trigger="available-now").awaitTermination()

    out = read_topic(broker_address, example.celsius.name, expect=N, isolation=isolation, timeout=60)
    got = {orjson.loads(m.value())["seq"]: (m.key(), orjson.loads(m.value())) for m in out}
    assert len(out) == N and sorted(got) == list(range(N))
    for seq, (key, value) in got.items():
        celsius = round((50.0 + seq % 60 - 32.0) / 1.8, 2)
        assert (key, value) == (f"s{seq % 7}".encode(),
                                {"sensor": f"s{seq % 7}", "seq": seq, "celsius": celsius, "hot": celsius > 30.0})
    dead = read_topic(broker_address, app.dlq_topic_name, expect=1, isolation=isolation, timeout=30)
    assert [m.value() for m in dead] == [b'{"sensor": "s0", "seq": "bad"}']
    assert dict(dead[0].headers())[HEADER_STAGE] == b"decode"
