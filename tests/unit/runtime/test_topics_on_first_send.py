"""A topic first sent to after the worker checked its topics is created with the app's settings
(its declared partitions, else ``topic_partitions``), never by the broker's auto-creation."""
import uuid

import streamkit as sk
from streamkit.transport.memory import MemoryBroker


def memory_app(tmp_path, **settings):
    name = f"first-send-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", store="memory://", web_enabled=False,
                  data_dir=str(tmp_path), topic_partitions=3, **settings)


def partitions(app, topic):
    logs = MemoryBroker.named(app.conf.broker.split("://", 1)[1]).logs
    return len(logs[topic]) if topic in logs else None


async def test_a_topic_declared_while_the_worker_runs_is_created_with_the_apps_partitions(tmp_path):
    app = memory_app(tmp_path)
    async with app.running():
        assert partitions(app, "late") is None
        await app.topic("late", value_type=int).send_and_wait(value=1)
        await app.topic("late-declared", value_type=int, partitions=2).send_and_wait(value=1)
        await app.send("by-name", value="x")
        await app.flush()
        assert (partitions(app, "late"), partitions(app, "late-declared"), partitions(app, "by-name")) == (3, 2, 3)


async def test_sends_that_skip_the_awaited_path_create_the_topic_too(tmp_path):
    app = memory_app(tmp_path)
    async with app.running():
        late = app.topic("late-soon", value_type=int)
        assert late.bound_try_send_soon() is None  # not created yet: no synchronous path around the creation
        assert not late.try_send_soon(None, 1)
        await late.send_soon(value=1)
        await app.flush()
        assert partitions(app, "late-soon") == 3
        assert late.try_send_soon(None, 2) and late.bound_try_send_soon() is not None


async def test_a_client_send_without_a_worker_creates_the_topic_with_the_apps_settings(tmp_path):
    app = memory_app(tmp_path)
    try:
        await app.topic("from-a-script", value_type=int).send_and_wait(value=1)
    finally:
        await app.stop()
    assert partitions(app, "from-a-script") == 3


async def test_a_reply_to_another_apps_existing_topic_keeps_its_partitions(tmp_path):
    app = memory_app(tmp_path)
    MemoryBroker.named(app.conf.broker.split("://", 1)[1]).create_topic("theirs", 5)
    async with app.running():
        await app.send_raw("theirs", None, b"x")
        await app.flush()
    assert partitions(app, "theirs") == 5
