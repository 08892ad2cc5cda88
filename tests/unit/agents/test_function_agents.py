"""Plain-function agents and folds run over each fetched batch in one loop (agents/functions.py):
the same guarantees as an ``async for`` agent, record by record, wherever the loop leaves the batch."""
import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker


def make_app(**settings):
    name = f"fn-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False,
                  **settings)


def prefill(app, topic: str, values: list[int], partitions: int = 1) -> MemoryBroker:
    """Records already in the log when the worker starts: its first fetch takes them as one batch."""
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.create_topic(topic, partitions)
    for value in values:
        broker.append(topic, b"k", str(value).encode(), 0, None, None)
    return broker


def in_and_out(app):
    """One-partition int topics: what the function reads, where its outputs go."""
    return (app.topic("in", key_type=str, value_type=int, partitions=1),
            app.topic("out", key_type=str, value_type=int, partitions=1))


def outputs(broker: MemoryBroker, topic: str) -> list[int]:
    """The values a read_committed reader sees (no transaction markers, nothing aborted)."""
    return [int(m.value) for part in broker.logs.get(topic, []) for m in part
            if m.offset not in broker.control.get(TP(topic, m.partition), ())
            and m.offset not in broker.aborted.get(TP(topic, m.partition), ())]


def committed(app, topic: str) -> int:
    return app.runtime.checkpoint.committed.get(TP(topic, 0), 0)


async def test_a_record_that_fails_mid_batch_is_retried_then_dead_lettered_and_no_other_is_repeated():
    app = make_app(agent_retries=1)
    source, out = in_and_out(app)
    calls: list[int] = []

    @app.agent(source, sink=[out])
    def double(value):
        calls.append(value)
        if value == 5:
            raise ValueError("five")
        return value * 2

    broker = prefill(app, "in", list(range(10)))
    async with app.running():
        await wait_for(lambda: committed(app, "in") == 10, 10, message="all 10 records committed")
        assert outputs(broker, "out") == [v * 2 for v in range(10) if v != 5]
    assert calls == [0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9]  # one try and one retry of 5, nothing else twice
    dead = [m for part in broker.logs[app.dlq_topic_name] for m in part]
    assert [m.value for m in dead] == [b"5"]


async def test_a_full_producer_mid_batch_waits_for_room_and_loses_no_output():
    app = make_app()
    source, out = in_and_out(app)

    @app.agent(source, sink=[out])
    def same(value):
        return value

    broker = prefill(app, "in", list(range(100)))
    broker.faults.buffer_full = 3  # three sends of the batch find no room: the record waits in send()
    async with app.running():
        await wait_for(lambda: committed(app, "in") == 100, 10, message="all 100 records committed")
    assert outputs(broker, "out") == list(range(100))
    assert broker.faults.buffer_full == 0


async def test_a_fold_whose_second_output_finds_no_room_sends_the_rest_in_order():
    app = make_app()
    source, out = in_and_out(app)
    totals = app.Table("totals", default=int)

    @app.fold(source, table=totals, sink=[out])
    def running(total, value):
        return total + value, [value, total + value, -value]

    broker = prefill(app, "in", [1, 2, 3])
    async with app.running():
        broker.faults.buffer_full = 2  # the first record's first two outputs wait for room
        await wait_for(lambda: committed(app, "in") == 3, 10, message="3 records committed")
        assert totals["k"] == 6
    assert outputs(broker, "out") == [1, 1, -1, 2, 3, -2, 3, 6, -3]
    assert broker.faults.buffer_full == 0


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_function_agent_takes_every_checkpoint_between_records(guarantee):
    """A checkpoint commits between two records of a batch (exactly-once closes the barrier
    mid-batch): the committed offset always matches the outputs sent for the records below it."""
    app = make_app(processing_guarantee=guarantee)
    source, out = in_and_out(app)

    @app.agent(source, sink=[out])
    def same(value):
        return value

    broker = prefill(app, "in", list(range(5000)))
    async with app.running():
        await wait_for(lambda: committed(app, "in") == 5000, 20, message="all records committed")
    assert outputs(broker, "out") == list(range(5000))


async def test_a_function_over_records_without_output_acks_them_in_the_loop():
    app = make_app()
    source, out = in_and_out(app)

    @app.agent(source, sink=[out])
    def multiples_of_ten(value):
        return value if value % 10 == 0 else None

    broker = prefill(app, "in", list(range(1000)))
    async with app.running():
        await wait_for(lambda: committed(app, "in") == 1000, 10, message="all 1000 records committed")
    assert outputs(broker, "out") == list(range(0, 1000, 10))


async def test_records_before_the_one_that_failed_count_as_processed_at_once():
    """A checkpoint taken while the failed record waits for its retry or the error policy
    commits up to it: the records before it sent their outputs already (under exactly-once
    those are in the transaction that commits that offset)."""
    from streamkit.runtime.event import Event
    from streamkit.runtime.inbox import Batch, Subscriber
    from streamkit.streams.stream import Stream
    from streamkit.transport.base import Message

    tp = TP("in", 0)
    subscriber = Subscriber("test", 4)
    stream = Stream(subscriber)
    await subscriber.put(Batch(tp, [Event(None, i, Message("in", 0, i, None, b"", None, None)) for i in range(10)]))

    def handle(event):
        if event.value == 5:
            raise ValueError("five")

    with pytest.raises(ValueError):
        stream.run_in_hand(await stream.next_event(), handle)
    assert subscriber.first_unprocessed(tp) == 5
    assert [event.value for event in stream.held_events()] == [5]


async def test_asking_a_function_agent_with_a_sink_gets_its_output_back():
    app = make_app()
    source, out = in_and_out(app)

    @app.agent(source, sink=[out])
    def triple(value):
        return value * 3

    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    async with app.running():
        assert await triple.ask(14, key="k") == 42
        await source.send(key="k", value=2)
        await wait_for(lambda: outputs(broker, "out") == [42, 6], 10, message="both outputs in the sink")
