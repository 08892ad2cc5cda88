"""Windowed tables on Spark against the worker: the same agents (tests/apps/spark_windows.py) over
the same clicks — out of order, some late, many per key — give the same finals, the same late
dead letters and the same changelog (each window's value and each partition's stream time, which
a worker started after the backfill continues from)."""
import asyncio
import importlib
import os
import time
import uuid
from collections import Counter

import orjson
import pytest
from confluent_kafka import Producer

from streamkit.testing.helpers import read_topic, wait_for
from streamkit.transport.partitioner import partition_for_key

from .outputs import finals, group_committed, latest

pytestmark = [pytest.mark.spark, pytest.mark.broker]

# An hour ago, on a whole minute: Kafka deletes records older than the topic's retention (7 days
# by default) by their timestamps, so a fixed date in the past empties the input under the test.
T0 = (int(time.time() * 1000) // 60_000 - 60) * 60_000
N_CLICKS = 480


@pytest.fixture(scope="module")
def windows_app(broker_address):
    os.environ["SPARK_WINDOWS_BROKER"] = broker_address  # before the session: its Python workers inherit it
    os.environ["SPARK_WINDOWS_RUN"] = uuid.uuid4().hex[:8]
    module = importlib.reload(importlib.import_module("tests.apps.spark_windows"))
    asyncio.run(module.spark_app.ensure_topics())
    return module


@pytest.fixture(scope="module")
def spark(windows_app):
    from streamkit.spark import spark_session

    session = spark_session("local[2,2]", conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "100"})
    yield session
    session.stop()


def clicks(module, count, shift=0):
    """(key, value, timestamp): 100 ms apart, every 7th 3 s early (inside most graces), every 29th
    40 s early (late for the short windows), 8 users, 5 pages."""
    out = []
    for i in range(count):
        at = T0 + shift + i * 100
        if i % 29 == 28:
            at -= 40_000
        elif i % 7 == 6:
            at -= 3_000
        user, page = f"u{i % 8}", f"p{(i * 3) % 5}"
        out.append((user.encode(), module.Click(user, page, at / 1000 + 0.5, 1 + i % 3).dumps(), at))
    return out


def produce(address, topic, records, partitions, module):
    """The records, then one lone click per partition (exact ends on the dev broker too)."""
    producer = Producer({"bootstrap.servers": address, "partitioner": "murmur2_random", "linger.ms": 5})
    for key, value, at in records:
        producer.produce(topic, key=key, value=value, timestamp=at)
    producer.flush(30)
    for i in range(6):  # u1's clicks in another partition than its key's
        misplaced = (partition_for_key(b"u1", partitions) + 1 + i % 2) % partitions
        producer.produce(topic, key=b"u1", value=module.Click("u1", "p9", T0 / 1000 + i, 5).dumps(),
                         timestamp=T0 + 40_000 + i * 100, partition=misplaced)
    producer.flush(30)
    last = max(at for _, _, at in records)
    for p in range(partitions):
        key = next(k for k in (f"tail{i}".encode() for i in range(1000)) if partition_for_key(k, partitions) == p)
        producer.produce(topic, key=key, value=module.Click(key.decode(), "p0", last / 1000, 1).dumps(),
                         timestamp=last, partition=p)
        producer.flush(30)
    return len(records) + 6 + partitions


@pytest.fixture(scope="module")
def source(windows_app, broker_address):
    topic = windows_app.spark_app.topics[f"clicks-{windows_app.RUN}"]
    return produce(broker_address, topic.name, clicks(windows_app, N_CLICKS), windows_app.PARTITIONS, windows_app)


def run_worker_until_done(app, total, repartitioned=None, timeout=90.0):
    """Run the worker until its group committed every record: ``total`` clicks, and
    ``repartitioned`` (default: all of them) through the group_by's topic."""
    repartitioned = total if repartitioned is None else repartitioned

    async def go():
        async with app.running():
            def done():
                clicks = group_committed(app, lambda t: t.startswith("clicks-") and t in app.topics)
                regrouped = group_committed(app, lambda t: t.startswith(f"{app.id}-") and t.endswith("-repartition"))
                return clicks >= total and regrouped >= repartitioned
            await wait_for(done, timeout, interval=0.5, message=f"{total} clicks committed by every agent")
    asyncio.run(go())


def test_every_window_type_on_spark_equals_the_worker(windows_app, spark, source, broker_address, capabilities,
                                                      tmp_path):
    total = source
    hides_aborted, _ = capabilities.check("read_committed_hides_aborted")
    isolation = "read_committed" if hides_aborted else "read_uncommitted"
    app, worker = windows_app.spark_app, windows_app.worker_app
    app.spark.use(spark)
    from streamkit.spark.facade import handoff

    for agent in ("count_clicks", "count_pages", "count_weights"):
        query = app.spark.run(agent, checkpoint=str(tmp_path / agent), trigger="available-now")
        query.awaitTermination()
        handoff(app.spark, query)  # as `streamkit spark --available-now` does: a worker continues from here
    run_worker_until_done(worker, total)
    for kind in ("tumbling", "hopping", "sessions", "sliding", "pages"):
        on_spark = finals(broker_address, app.finals[kind].name, isolation)
        on_worker = finals(broker_address, worker.finals[kind].name, "read_uncommitted")
        assert on_worker or kind == "pages", kind  # windows closed: the comparison compares something
        assert on_spark == on_worker, kind
        spark_log = latest(broker_address, app.tables[kind].changelog.name, isolation)
        worker_log = latest(broker_address, worker.tables[kind].changelog.name, "read_uncommitted")
        assert spark_log and spark_log == worker_log, kind  # open windows and each partition's stream time
    tally = latest(broker_address, app.tables["tally"].changelog.name, isolation)
    assert tally == latest(broker_address, worker.tables["tally"].changelog.name, "read_uncommitted")
    assert {p for p, k in tally if k == b"u1"} == set(range(windows_app.PARTITIONS))  # its home and two others
    late = [m for m in read_topic(broker_address, worker.dlq_topic_name, to_end=True)]
    late_spark = [m for m in read_topic(broker_address, app.dlq_topic_name, to_end=True, isolation=isolation)]
    assert late and Counter((m.key(), m.value()) for m in late) == Counter((m.key(), m.value()) for m in late_spark)
    assert {dict(m.headers())["streamkit-stage"] for m in late_spark} == {b"window"}
    tumbling_finals = finals(broker_address, app.finals["tumbling"].name, isolation)
    assert sum(orjson.loads(v)["value"] for _, _, v in tumbling_finals.elements()) < total  # late ones dropped


def test_a_worker_continues_the_windows_spark_left_open(windows_app, spark, source, broker_address, capabilities):
    """After the backfill above, more clicks: the Spark app's worker restores the open windows and
    each partition's stream time from the changelogs Spark wrote, continues from the offsets Spark
    committed, and closes those windows itself. Its finals, added to Spark's, are the worker-only
    app's finals over all the clicks, and the changelogs end equal."""
    hides_aborted, _ = capabilities.check("read_committed_hides_aborted")
    isolation = "read_committed" if hides_aborted else "read_uncommitted"
    app, worker = windows_app.spark_app, windows_app.worker_app
    topic = app.topics[f"clicks-{windows_app.RUN}"].name
    more = clicks(windows_app, 240, shift=720_000)  # 12 minutes on: past the page windows' 10-minute grace
    producer = Producer({"bootstrap.servers": broker_address, "partitioner": "murmur2_random", "linger.ms": 5})
    for key, value, at in more:
        producer.produce(topic, key=key, value=value, timestamp=at)
    assert producer.flush(30) == 0
    total = source + len(more)
    run_worker_until_done(worker, total)
    run_worker_until_done(app, total, repartitioned=len(more))  # Spark re-keyed the first part in its query
    for kind in ("tumbling", "hopping", "sessions", "sliding", "pages"):
        both = finals(broker_address, app.finals[kind].name, isolation)
        assert both == finals(broker_address, worker.finals[kind].name, "read_uncommitted"), kind
        assert latest(broker_address, app.tables[kind].changelog.name, isolation) == latest(
            broker_address, worker.tables[kind].changelog.name, "read_uncommitted"), kind
    pages = finals(broker_address, app.finals["pages"].name, isolation)
    assert pages  # the first minute's page windows closed on the worker, after Spark left them open
