"""Faust's sensors: ``app.sensors.add(sensor)`` hears every message, event, table access, send,
commit, rebalance and web request, with Faust's arguments; ``app.monitor`` counts them."""
from __future__ import annotations

import logging
import uuid

import pytest

import streamkit as faust
from streamkit.devbroker import free_port
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


class Recorder(faust.Sensor):
    def __init__(self):
        self.calls: list[tuple] = []

    def on_message_in(self, tp, offset, message):
        self.calls.append(("message_in", tp.topic, offset))

    def on_stream_event_in(self, tp, offset, stream, event):
        self.calls.append(("event_in", tp.topic, offset, event.value))
        return ("state", offset)

    def on_stream_event_out(self, tp, offset, stream, event, state=None):
        self.calls.append(("event_out", tp.topic, offset, state))

    def on_message_out(self, tp, offset, message):
        self.calls.append(("message_out", tp.topic, offset))

    def on_table_get(self, table, key):
        self.calls.append(("table_get", table.name, key))

    def on_table_set(self, table, key, value):
        self.calls.append(("table_set", table.name, key, value))

    def on_table_del(self, table, key):
        self.calls.append(("table_del", table.name, key))

    def on_send_initiated(self, producer, topic, message, keysize, valsize):
        self.calls.append(("send", topic, (message.key, message.value), keysize, valsize))
        return topic

    def on_send_completed(self, producer, state, metadata):
        self.calls.append(("sent", state))

    def on_send_error(self, producer, exc, state):
        self.calls.append(("send_error", state, type(exc).__name__))

    def on_commit_initiated(self, consumer):
        return "commit"

    def on_commit_completed(self, consumer, state):
        self.calls.append(("committed", state))

    def on_rebalance_start(self, app):
        return "rebalance"

    def on_rebalance_end(self, app, state):
        self.calls.append(("rebalanced", state))

    def on_web_request_start(self, app, request, *, view=None):
        return request.path

    def on_web_request_end(self, app, request, response, state, *, view=None):
        self.calls.append(("web", state, response.status, view.__name__))

    def of(self, kind):
        return [c for c in self.calls if c[0] == kind]


class Broken(faust.Sensor):
    def on_stream_event_in(self, tp, offset, stream, event):
        raise RuntimeError("sensor bug")


def memory_app(**settings):
    name = f"sensors-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", store="memory://", **settings)


async def test_a_sensor_hears_messages_events_tables_sends_commits_rebalances_and_web_requests(caplog):
    import aiohttp

    port = free_port()
    app = memory_app(web_port=port, commit_interval=0.1)
    words = app.topic("words", key_type=str, value_type=str, partitions=1)
    shouted = app.topic("shouted", key_type=str, value_type=str, partitions=1)
    counts = app.Table("counts", default=int)
    recorder, broken = Recorder(), Broken()
    app.sensors.add(recorder)
    app.sensors.add(broken)
    monitor = app.monitor

    @app.agent(words)
    async def shout(stream):
        async for event in stream.events():
            counts[event.key] += 1
            if event.value == "forget":
                del counts[event.key]
            await shouted.send(key=event.key, value=event.value.upper())

    @app.page("/hello")
    async def hello(web, request):
        return web.json({"hello": True})

    caplog.set_level(logging.ERROR, "streamkit.sensors")
    async with app.running():
        await words.send(key="a", value="hi")
        await words.send(key="a", value="forget")
        await wait_for(lambda: len(recorder.of("sent")) == 4, 10, message="both records relayed")  # 2 + 2 input sends
        await wait_for(lambda: recorder.of("committed"), 10, message="a checkpoint")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/hello") as resp:
                assert resp.status == 200
            async with session.get(f"http://127.0.0.1:{port}/stats") as resp:
                stats = await resp.json()
    assert recorder.of("message_in") == [("message_in", "words", 0), ("message_in", "words", 1)]
    assert recorder.of("event_in") == [("event_in", "words", 0, "hi"), ("event_in", "words", 1, "forget")]
    # each event's out carries the state its in returned; the last one's comes when the stream stops asking
    assert recorder.of("event_out")[0] == ("event_out", "words", 0, ("state", 0))
    assert ("message_out", "words", 0) in recorder.calls
    # counts[k] += 1 on a new key: the default stored on first read (Faust's), then the sum
    assert recorder.of("table_set")[:2] == [("table_set", "counts", "a", 0), ("table_set", "counts", "a", 1)]
    assert ("table_get", "counts", "a") in recorder.calls and recorder.of("table_del") == [("table_del", "counts", "a")]
    assert ("send", "shouted", ("a", "HI"), 1, 4) in recorder.calls and ("sent", "shouted") in recorder.calls
    assert recorder.of("committed")[0] == ("committed", "commit")
    assert recorder.of("rebalanced") == [("rebalanced", "rebalance")]
    assert recorder.of("web") == [("web", "/hello", 200, "hello")]
    # the broken sensor failed on every event, logged once, and nothing else noticed
    assert app.sensors.failures >= 2 and len([r for r in caplog.records if "sensor Broken failed" in r.message]) == 1, [
        r.message for r in caplog.records
    ]
    assert stats["events_total"] == 2 and stats["messages_received_by_topic"] == {"words": 2}
    assert stats["tables"]["counts"]["keys_deleted"] == 1 and stats["messages_sent_by_topic"]["shouted"] == 2
    assert monitor.asdict()["rebalances"] == 1


async def test_a_failed_delivery_reaches_on_send_error():
    app = memory_app(web_enabled=False)
    out = app.topic("out", partitions=1)
    recorder = Recorder()
    app.sensors.add(recorder)
    async with app.running():
        MemoryBroker.named(app.conf.broker.split("://", 1)[1]).faults.fail_sends = 1
        future = await out.send(value="lost")
        with pytest.raises(Exception):  # noqa: B017 - any failure: the sensor hook after it is under test
            await future
    assert recorder.of("send_error") == [("send_error", "out", "InjectedFault")]


async def test_stats_without_a_monitor_says_how_to_get_one():
    import aiohttp

    port = free_port()
    app = memory_app(web_port=port)
    async with app.running():
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/stats") as resp:
                assert resp.status == 404 and "app.monitor" in (await resp.json())["error"]
