"""``topic.send_soon(...)`` is a plain call, as in Faust: synchronous code (an on_window_close
callback, a helper an agent calls) sends with it; ``await topic.send_soon(...)`` still works;
a scheduled send that fails unawaited fails the checkpoint, so its record is processed again."""
import uuid
import warnings

import orjson
import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def memory_app(**settings):
    name = f"soon-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                  **{"commit_interval": 0.05, **settings})


def producer_full(app):
    """The producer takes no record at once (its buffer full): send_soon schedules every send."""
    app.runtime.producer.try_send = lambda *args, **kwargs: False


def logged(app, topic):
    return [orjson.loads(m.value) for part in MemoryBroker.named(app.conf.bootstrap_servers).logs.get(topic, [])
            for m in part]


GUARANTEES = pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])


@GUARANTEES
async def test_send_soon_without_await_from_synchronous_code_sends_the_record(guarantee):
    app = memory_app(processing_guarantee=guarantee)
    source = app.topic("soon-in", value_type=int, partitions=1)
    sink = app.topic("soon-out", value_type=int, partitions=1)

    def forward(value):  # synchronous, as Faust's on_window_close callbacks are
        sink.send_soon(value=value * 10)

    @app.agent(source)
    async def relay(stream):
        async for value in stream:
            forward(value)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited": nothing sent
        async with app.running():
            producer_full(app)
            for i in range(5):
                await source.send(value=i)
            await wait_for(lambda: len(logged(app, "soon-out")) == 5, 10, message="every record forwarded")
            assert logged(app, "soon-out") == [0, 10, 20, 30, 40]  # in order
            await sink.send_soon(value=99)  # awaited, as streamkit code and Faust code may
            await wait_for(lambda: logged(app, "soon-out")[-1:] == [99], 10)


@GUARANTEES
async def test_a_scheduled_send_that_fails_unawaited_rolls_the_checkpoint_back(guarantee, caplog):
    app = memory_app(processing_guarantee=guarantee)
    source = app.topic("soon-in", value_type=int, partitions=1)
    sink = app.topic("soon-out", value_type=int, partitions=1)
    send_raw, failures = app.send_raw, []

    async def failing_once(topic, *args, **kwargs):
        if topic == "soon-out" and not failures:
            failures.append(topic)
            raise ConnectionError("broker gone")
        return await send_raw(topic, *args, **kwargs)

    app.send_raw = failing_once

    @app.agent(source)
    async def relay(stream):
        async for value in stream:
            sink.send_soon(value=value)

    async with app.running():
        producer_full(app)
        await source.send(value=7)
        await wait_for(lambda: logged(app, "soon-out") == [7], 10, message="the record processed again and sent")
        assert failures and app.runtime.checkpoint.rollbacks >= 1
    assert any("send_soon" in r.getMessage() and "processed again" in r.getMessage() for r in caplog.records)
