"""Columnar agents (``@app.agent(topic, columnar=True)``, agents/columnar.py): a function of a
pyarrow RecordBatch per fetched batch, its failures retried, then bisected down to the record
that goes to the dead-letter topic; the others' outputs go out."""
import sys
import uuid
from datetime import datetime

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import streamkit as sk
from streamkit.errors import ConfigurationError
from streamkit.runtime.dead_letters import HEADER_ERROR, HEADER_OFFSET, HEADER_STAGE
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker


class Reading(sk.Record):
    sensor: str
    seq: int
    value: float


class Enriched(sk.Record):
    sensor: str
    seq: int
    celsius: float


def make_app(**settings):
    name = f"col-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False,
                  **settings)


def topics(app):
    return (app.topic("in", key_type=str, value_type=Reading, partitions=1),
            app.topic("out", key_type=str, value_type=Enriched, partitions=1))


def prefill(app, values: list[bytes], topic: str = "in") -> MemoryBroker:
    """Records in the log before the worker starts: its first fetch takes them as one batch."""
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.create_topic(topic, 1)
    for i, value in enumerate(values):
        broker.append(topic, f"s{i % 3}".encode(), value, 0, None, 1_700_000_000_000 + i)
    return broker


def readings(n: int) -> list[bytes]:
    return [Reading(f"s{i % 3}", i, i / 10).dumps() for i in range(n)]


def records(broker: MemoryBroker, topic: str) -> list:
    """What a read_committed reader sees of ``topic``."""
    return [m for part in broker.logs.get(topic, []) for m in part
            if m.offset not in broker.control.get(TP(topic, m.partition), ())
            and m.offset not in broker.aborted.get(TP(topic, m.partition), ())]


def committed(app, topic: str = "in") -> int:
    return app.runtime.checkpoint.committed.get(TP(topic, 0), 0)


def enrich(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Fahrenheit to Celsius, keyed by sensor: vectorised, no Python per row."""
    celsius = pc.divide(pc.subtract(batch.column("value"), 32.0), 1.8)
    return pa.RecordBatch.from_arrays([batch.column("sensor"), batch.column("sensor"), batch.column("seq"), celsius],
                                      names=["key", "sensor", "seq", "celsius"])


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_columnar_agent_maps_each_batch_to_output_rows(guarantee):
    app = make_app(processing_guarantee=guarantee)
    source, out = topics(app)
    seen: list[pa.RecordBatch] = []

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        seen.append(batch)
        return enrich(batch)

    broker = prefill(app, readings(500))
    async with app.running():
        await wait_for(lambda: committed(app) == 500, 10, message="all 500 records committed")
    got = records(broker, "out")
    assert [orjson.loads(m.value) for m in got] == [
        {"sensor": f"s{i % 3}", "seq": i, "celsius": (i / 10 - 32.0) / 1.8} for i in range(500)]
    assert [m.key for m in got] == [f"s{i % 3}".encode() for i in range(500)]
    first = seen[0]
    assert first.schema.names == ["sensor", "seq", "value", "key", "timestamp", "partition", "offset"]
    assert first.schema.field("seq").type == pa.int64() and first.schema.field("value").type == pa.float64()
    assert first.column("offset").to_pylist()[:3] == [0, 1, 2]
    assert first.column("timestamp")[1].as_py() == datetime.fromtimestamp(1_700_000_000.001).astimezone()
    assert sum(b.num_rows for b in seen) == 500 and len(seen) < 500  # batches, not records


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_failing_batch_is_retried_then_bisected_to_the_record_that_goes_to_the_dlq(guarantee):
    app = make_app(agent_retries=2, processing_guarantee=guarantee)
    source, out = topics(app)
    sizes: list[int] = []

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        sizes.append(batch.num_rows)
        if 37 in batch.column("seq").to_pylist():
            raise ValueError("seq 37 is poison")
        return enrich(batch)

    broker = prefill(app, readings(100))
    async with app.running():
        await wait_for(lambda: committed(app) == 100, 10, message="all 100 records committed")
    assert [orjson.loads(m.value)["seq"] for m in records(broker, "out")] == [i for i in range(100) if i != 37]
    dead = records(broker, app.dlq_topic_name)
    assert [m.value for m in dead] == [readings(100)[37]]
    headers = dict(dead[0].headers)
    assert headers[HEADER_OFFSET] == b"37" and headers[HEADER_STAGE] == b"agent to_celsius"
    assert headers[HEADER_ERROR] == b"seq 37 is poison"
    assert sizes[:3] == [100, 100, 100]  # one try and agent_retries=2 retries of the whole batch
    assert 1 in sizes and len(sizes) <= 3 + 2 * 7  # then halves down to the one record: log2(100) levels


async def test_a_value_that_does_not_decode_goes_to_the_dlq_and_the_rest_of_its_batch_on():
    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        return enrich(batch)

    values = readings(10)
    values[4] = b'{"sensor": "s1", "seq": "four", "value": 0.4}'
    broker = prefill(app, values)
    async with app.running():
        await wait_for(lambda: committed(app) == 10, 10, message="all 10 records committed")
    assert [orjson.loads(m.value)["seq"] for m in records(broker, "out")] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    dead = records(broker, app.dlq_topic_name)
    assert [m.value for m in dead] == [values[4]]
    assert dict(dead[0].headers)[HEADER_STAGE] == b"decode"


async def test_a_record_missing_a_required_field_is_refused_as_the_worker_refuses_it():
    """pyarrow's reader leaves a missing field null; the Record type says it is required."""
    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        return enrich(batch)

    values = readings(5)
    values[2] = b'{"sensor": "s2", "value": 0.2}'
    broker = prefill(app, values)
    async with app.running():
        await wait_for(lambda: committed(app) == 5, 10, message="all 5 records committed")
    assert [orjson.loads(m.value)["seq"] for m in records(broker, "out")] == [0, 1, 3, 4]
    assert [m.value for m in records(broker, app.dlq_topic_name)] == [values[2]]


async def test_none_and_an_empty_table_are_no_output_and_the_records_are_committed():
    app = make_app()
    source, out = topics(app)
    calls = []

    @app.agent(source, sink=[out], columnar=True)
    def nothing(batch):
        calls.append(batch.num_rows)
        return None if len(calls) % 2 else pa.table({"sensor": pa.array([], pa.string())})

    broker = prefill(app, readings(50))
    async with app.running():
        await wait_for(lambda: committed(app) == 50, 10, message="all 50 records committed")
    assert sum(calls) == 50 and records(broker, "out") == []


async def test_a_table_without_key_column_is_sent_unkeyed_and_filters_rows():
    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def hot(batch):
        table = pa.Table.from_batches([batch]).filter(pc.greater(batch.column("value"), 4.0))
        return table.select(["sensor", "seq"]).append_column("celsius", pc.multiply(table.column("value"), 1.0))

    broker = prefill(app, readings(50))
    async with app.running():
        await wait_for(lambda: committed(app) == 50, 10, message="all 50 records committed")
    got = records(broker, "out")
    assert [orjson.loads(m.value)["seq"] for m in got] == list(range(41, 50))
    assert {m.key for m in got} == {None}


# -- refusals ------------------------------------------------------------------------------------


def test_a_columnar_agent_without_pyarrow_names_the_extra(monkeypatch):
    app = make_app()
    source, out = topics(app)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(ConfigurationError, match=r"pip install 'streamkit\[columnar\]'"):
        @app.agent(source, sink=[out], columnar=True)
        def to_celsius(batch):
            return batch


@pytest.mark.parametrize("declare, message", [
    (lambda app: app.topic("untyped"), "value_type is a Record"),
    (lambda app: app.topic("ints", value_type=int), "value_type is a Record"),
])
def test_a_columnar_agent_needs_a_record_topic(declare, message):
    app = make_app()
    with pytest.raises(ConfigurationError, match=message):
        @app.agent(declare(app), columnar=True)
        def f(batch):
            return batch


def test_a_field_named_like_a_metadata_column_is_refused():
    class Positioned(sk.Record):
        offset: int

    app = make_app()
    with pytest.raises(ConfigurationError, match="offset"):
        @app.agent(app.topic("pos", value_type=Positioned), columnar=True)
        def f(batch):
            return batch


def test_a_field_without_an_arrow_type_is_refused_naming_it():
    class Stamped(sk.Record):
        at: datetime

    app = make_app()
    with pytest.raises(ConfigurationError, match=r"Stamped\.at"):
        @app.agent(app.topic("stamped", value_type=Stamped), columnar=True)
        def f(batch):
            return batch


def test_an_async_columnar_agent_is_refused():
    app = make_app()
    source, out = topics(app)
    with pytest.raises(ConfigurationError, match="def fn"):
        @app.agent(source, sink=[out], columnar=True)
        async def f(stream):
            async for value in stream:
                yield value


def test_a_columnar_agent_sinks_to_topics_only():
    app = make_app()
    source, _ = topics(app)
    with pytest.raises(ConfigurationError, match="sink to a topic"):
        @app.agent(source, sink=[print], columnar=True)
        def f(batch):
            return batch


def test_a_columnar_agents_test_context_is_refused_with_what_to_do():
    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def f(batch):
        return batch

    with pytest.raises(ConfigurationError, match="RecordBatch directly"):
        f.test_context()


def test_the_guides_columnar_example_is_the_one_the_tests_run():
    """docs/guide.md shows examples/columnar_enrich.py's function (run on the broker and on Spark)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    guide = (root / "docs" / "guide.md").read_text()
    snippet = re.search(r"### Columnar agents.*?```python\n(.*?)```", guide, re.S).group(1)
    example = (root / "examples" / "columnar_enrich.py").read_text()
    assert all(line in example.splitlines() for line in snippet.splitlines()), snippet


def test_a_sink_that_does_not_take_json_is_refused():
    app = make_app()
    source, _ = topics(app)
    with pytest.raises(ConfigurationError, match="JSON object"):
        @app.agent(source, sink=[app.topic("raw-out", value_type=bytes)], columnar=True)
        def f(batch):
            return batch


async def test_column_names_a_struct_cannot_take_and_a_key_only_result_encode_as_json_objects():
    app = make_app()
    source = app.topic("in", key_type=str, value_type=Reading, partitions=1)
    out = app.topic("out", key_type=str, partitions=1)

    @app.agent(source, sink=[out], columnar=True)
    def odd_names(batch):
        if batch.column("seq")[0].as_py() == 0:
            return pa.table({"key": batch.column("key"), "class": batch.column("seq"), "a b": batch.column("sensor")})
        return pa.table({"key": batch.column("key")})

    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.create_topic("in", 1)
    broker.append("in", b"k0", readings(1)[0], 0, None, 1)
    async with app.running():
        await wait_for(lambda: committed(app) == 1, 10, message="the first record committed")
        broker.append("in", b"k1", Reading("s1", 1, 0.1).dumps(), 0, None, 2)
        await wait_for(lambda: committed(app) == 2, 10, message="the second record committed")
    assert [(m.key, orjson.loads(m.value)) for m in records(broker, "out")] == [
        (b"k0", {"class": 0, "a b": "s0"}), (b"k1", {})]


def test_a_columnar_agent_using_arrow_take_runs_on_spark():
    """``take`` is a refused stream method on Spark (wall-clock batches), not Arrow's ``take``."""
    pytest.importorskip("pyspark")
    from streamkit.spark.checks import check_runnable

    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def first_rows(batch):
        return batch.take(pa.array([0]))

    check_runnable(first_rows)  # no SparkUnsupported


async def test_a_topic_read_by_a_columnar_and_a_plain_agent_dead_letters_a_bad_value_once():
    """The router decodes for the plain agent and dead-letters what does not decode; the columnar
    agent's batches leave that record out, so it is dead-lettered once, not once per agent."""
    app = make_app()
    source, out = topics(app)
    plain_seen = []

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        return enrich(batch)

    @app.agent(source)
    def plain(reading):
        plain_seen.append(reading.seq)

    values = readings(6)
    values[3] = b"not json"
    broker = prefill(app, values)
    async with app.running():
        await wait_for(lambda: committed(app) == 6 and len(plain_seen) == 5, 10, message="both agents done")
    assert plain_seen == [0, 1, 2, 4, 5]
    assert [orjson.loads(m.value)["seq"] for m in records(broker, "out")] == [0, 1, 2, 4, 5]
    assert [m.value for m in records(broker, app.dlq_topic_name)] == [b"not json"]


async def test_a_value_the_codec_refuses_for_its_number_type_goes_to_the_dlq_not_truncated():
    """A 3.5 where the Record says int: the topic's codec refuses it, so the batch decode does
    too (Arrow alone would have made it 3)."""
    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        return enrich(batch)

    values = readings(6)
    values[3] = b'{"sensor": "s0", "seq": 3.5, "value": 0.3}'
    broker = prefill(app, values)
    async with app.running():
        await wait_for(lambda: committed(app) == 6, 10, message="all 6 records committed")
    assert [orjson.loads(m.value)["seq"] for m in records(broker, "out")] == [0, 1, 2, 4, 5]
    dead = records(broker, app.dlq_topic_name)
    assert [m.value for m in dead] == [values[3]]
    assert dict(dead[0].headers)[HEADER_STAGE] == b"decode"


async def test_a_key_that_is_not_utf8_goes_to_the_dlq_and_text_keys_come_out_as_their_bytes():
    app = make_app()
    source, out = topics(app)

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        return enrich(batch)

    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.create_topic("in", 1)
    keys = [b"s0", "s\u00e9".encode(), b"\xff\xfe", b"s3"]
    for i, key in enumerate(keys):
        broker.append("in", key, Reading("sensor-\u00e9", i, i / 10).dumps(), 0, None, 1_700_000_000_000 + i)
    async with app.running():
        await wait_for(lambda: committed(app) == 4, 10, message="all 4 records committed")
    out_records = records(broker, "out")
    assert [orjson.loads(m.value)["seq"] for m in out_records] == [0, 1, 3]
    assert {m.key for m in out_records} == {"sensor-\u00e9".encode()}  # the sensor column as key: its UTF-8
    dead = records(broker, app.dlq_topic_name)
    assert [m.key for m in dead] == [b"\xff\xfe"] and dict(dead[0].headers)[HEADER_STAGE] == b"decode"


class Tagged(sk.Record):
    sensor: str
    seq: int
    value: float
    unit: str = "F"
    note: str | None = None


async def test_a_field_left_out_takes_the_records_default_and_an_optional_one_is_null():
    app = make_app()
    source = app.topic("in", key_type=str, value_type=Tagged, partitions=1)
    out = app.topic("out", key_type=str, value_type=Enriched, partitions=1)
    seen: list[dict] = []

    @app.agent(source, sink=[out], columnar=True)
    def keep(batch):
        seen.extend(batch.select(["seq", "unit", "note"]).to_pylist())

    prefill(app, [b'{"sensor": "a", "seq": 0, "value": 1.0}',
                  b'{"sensor": "a", "seq": 1, "value": 1.0, "unit": "C", "note": "x"}',
                  b'{"sensor": "a", "seq": 2, "value": 1.0, "unit": "K"}'])
    async with app.running():
        await wait_for(lambda: committed(app) == 3, 10, message="all 3 records committed")
    assert sorted(seen, key=lambda row: row["seq"]) == [{"seq": 0, "unit": "F", "note": None},
                                                        {"seq": 1, "unit": "C", "note": "x"},
                                                        {"seq": 2, "unit": "K", "note": None}]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_body_that_crashes_holding_a_batch_gets_the_whole_batch_again(guarantee, monkeypatch):
    """The batch in hand is held as one span (streams/stream.py): a crash outside the function
    (here the decode, once) hands every record of it out again, and none is committed before."""
    from streamkit.agents.columnar import Columnar

    app = make_app(agent_retries=2, processing_guarantee=guarantee)
    source, out = topics(app)
    seen: list[list[int]] = []
    decode, crashed = Columnar.decode, []

    def decode_crashing_once(self, messages):
        if not crashed:
            crashed.append([m.offset for m in messages])
            raise RuntimeError("the worker's own code failed holding the batch")
        return decode(self, messages)

    monkeypatch.setattr(Columnar, "decode", decode_crashing_once)

    @app.agent(source, sink=[out], columnar=True)
    def to_celsius(batch):
        seen.append(batch.column("seq").to_pylist())
        return enrich(batch)

    broker = prefill(app, readings(300))
    async with app.running():
        await wait_for(lambda: committed(app) == 300, 10, message="all 300 records committed")
    assert crashed == [list(range(300))]
    assert seen[0] == list(range(300)), "the batch did not come again whole"
    assert [orjson.loads(m.value)["seq"] for m in records(broker, "out")] == list(range(300))
    assert records(broker, app.dlq_topic_name) == []
