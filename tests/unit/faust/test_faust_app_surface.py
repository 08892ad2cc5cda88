"""A Faust-style app, written as Faust users write it (``import streamkit as faust``): tasks,
services, SetTable, crontab(tz=), app.is_leader(), with the memory driver standing in."""
from __future__ import annotations

import uuid

import mode
import pytest

import streamkit as faust
from streamkit.testing import wait_for
from streamkit.transport import TP


def make_app(name, tmp_path):
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     data_dir=str(tmp_path))


async def test_tasks_services_and_a_set_table(tmp_path):
    app = make_app(f"faust-{uuid.uuid4().hex[:6]}", tmp_path)
    events: list[str] = []
    tags = app.topic("tags")
    tagged = app.SetTable("tagged")

    @app.task
    async def on_started():
        events.append("task")

    @app.task(on_leader=True)
    async def leader_only(app):
        events.append(f"leader task, is_leader()={app.is_leader()}")

    @app.task
    async def broken():
        raise RuntimeError("task failure")

    @app.service
    class Background(mode.Service):
        async def on_start(self) -> None:
            events.append("service started")

        async def on_stop(self) -> None:
            events.append("service stopped")

    @app.crontab("0 * * * *", tz="Europe/Oslo")
    async def hourly():
        pass

    @app.agent(tags)
    async def tag(stream):
        async for event in stream.events():
            tagged[event.key].add(event.value)

    async with app.running():
        await wait_for(lambda: "leader task, is_leader()=True" in events and "task" in events, 10)
        assert app.background.failures == 1  # logged and counted; the worker goes on
        await tags.send(key="u1", value="a")
        await tags.send(key="u1", value="b")
        await wait_for(lambda: app.runtime.tables.ready and tagged.get("u1") == {"a", "b"}, 10,
                       message="the set table holds both")
        assert app.is_leader and app.is_leader() is True
    assert events[0] == "service started" and events[-1] == "service stopped"


def test_refusals_name_the_way_out(tmp_path):
    app = make_app("refusals", tmp_path)
    with pytest.raises(faust.ConfigurationError, match="start_manager=True"):
        app.SetTable("x", start_manager=True)
    with pytest.raises(faust.ConfigurationError, match="not both"):
        app.crontab("* * * * *", timezone="UTC", tz="UTC")


async def test_rebalance_and_lifecycle_signals(tmp_path):
    app = make_app(f"signals-{uuid.uuid4().hex[:6]}", tmp_path)
    seen: list[tuple] = []
    words = app.topic("words", partitions=2)

    @app.agent(words)
    async def count(stream):
        async for _ in stream:
            pass

    @app.on_worker_init.connect
    def init(sender):
        seen.append(("init", sender is app))

    @app.on_partitions_assigned.connect
    async def assigned(sender, assigned):
        seen.append(("assigned", sorted(tp.partition for tp in assigned if tp.topic == "words")))
        seen.append(("rebalancing", sender.rebalancing))

    @app.on_partitions_assigned.connect
    async def broken(sender, assigned):
        raise RuntimeError("receiver failure")

    @app.on_rebalance_complete.connect
    async def complete(sender):
        seen.append(("complete",))

    @app.on_before_shutdown.connect
    async def shutdown(sender):
        seen.append(("shutdown",))

    async with app.running():
        await wait_for(lambda: ("complete",) in seen, 10, message="the first rebalance signalled")
        assert ("assigned", [0, 1]) in seen and app.on_partitions_assigned.failures >= 1
        assert ("rebalancing", True) in seen and app.rebalancing is False  # during the assignment only
    assert seen[0] == ("init", True) and seen[-1] == ("shutdown",)


async def test_configuration_signals_run_once_before_the_worker_uses_the_settings(tmp_path):
    app = make_app(f"conf-{uuid.uuid4().hex[:6]}", tmp_path)
    order: list[str] = []

    @app.on_before_configured.connect
    def before(sender, **kwargs):
        order.append("before")

    @app.on_configured.connect
    def configured(sender, conf, **kwargs):
        order.append("configured")
        conf.commit_interval = 0.25  # Faust apps set settings here

    @app.on_after_configured.connect
    async def after(sender, **kwargs):
        order.append("after")

    async with app.running():
        assert app.conf.commit_interval == 0.25
    await app.configure()  # once only
    assert order == ["before", "configured", "after"]


async def test_app_stream_event_forward_and_send_table_helpers(tmp_path):
    from streamkit.transport.memory import MemoryBroker

    app = make_app(f"ops-{uuid.uuid4().hex[:6]}", tmp_path)
    source = app.topic("source", key_type=str, value_type=int)
    copies = app.topic("copies", key_type=str, value_type=int)
    doubled = app.topic("doubled", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)
    seen: list[int] = []
    stamps: list[tuple] = []

    @app.agent(source)
    async def relay(stream):
        async for event in stream.events():
            stamps.append((event.headers, event.message.timestamp, event.timestamp))
            await event.forward(copies, headers=[("via", b"relay")])
            await event.send(doubled, value=event.value * 2)
            totals[event.key] += event.value
            seen.append(event.value)

    # app.stream over an iterable, with the stream operators
    assert [v async for v in app.stream([1, 2, 3, 4]).filter(lambda v: v % 2 == 0).map(lambda v: v * 10)] == [20, 40]
    with pytest.raises(faust.ConfigurationError, match="read by an agent"):
        app.stream(source)
    async with app.running():
        await app.send(source, key="k", value=5, headers=[("h", b"1"), ("h", b"2")], timestamp=1234.5)
        await app.send("source", key="k", value=7)
        await wait_for(lambda: seen == [5, 7], 10, message="both records relayed")
        # Faust's types: headers a dict (the last of a repeated name), message.timestamp in seconds
        assert stamps[0] == ({"h": b"2"}, 1234.5, 1234500)
        await app.flush()
        broker = MemoryBroker.named(app.conf.broker.split("://", 1)[1])
        copied = [m for part in broker.logs["copies"] for m in part]
        assert [(m.key, m.value, m.headers) for m in copied] == [(b"k", b"5", [("via", b"relay")]),
                                                                  (b"k", b"7", [("via", b"relay")])]
        assert sorted(m.value for part in broker.logs["doubled"] for m in part) == [b"10", b"14"]
        assert totals.changelog_topic is totals.changelog
        text = totals.as_ansitable(title="Totals")
        assert text.splitlines()[0] == "Totals" and "| 'k' | 12    |" in text
    with pytest.raises(TypeError, match="topic object"):
        await faust.Event("k", 1, copied[0]).forward("copies")


async def test_topic_declare_creates_the_topic_now(tmp_path):
    from streamkit.transport.memory import MemoryBroker

    app = make_app(f"decl-{uuid.uuid4().hex[:6]}", tmp_path)
    topic = app.topic("declared-now", partitions=3)
    await topic.maybe_declare()
    assert len(MemoryBroker.named(app.conf.broker.split("://", 1)[1]).logs["declared-now"]) == 3
    await topic.declare()  # existing: checked, not recreated
    with pytest.raises(faust.TopicMismatch, match="exists with 3 partitions but is declared with 5"):
        await faust.Topic(app, "declared-now", partitions=5).declare()


async def test_one_agent_reads_several_topics_declared_together(tmp_path):
    app = make_app(f"multi-{uuid.uuid4().hex[:6]}", tmp_path)
    both = app.topic("orders-eu", "orders-us", key_type=str, value_type=int, partitions=2)
    totals = app.Table("totals", default=int)
    seen: list[tuple[str, int]] = []

    @app.agent(both)
    async def total(stream):
        async for event in stream.events():
            totals[event.key] += event.value
            seen.append((event.topic, event.value))

    assert both.topics == ("orders-eu", "orders-us") and {"orders-eu", "orders-us"} <= {t.name for t in app.all_topics()}
    with pytest.raises(TypeError, match="several topics: send to one of them"):
        await both.send(key="k", value=1)
    async with app.running():
        await app.send("orders-eu", key="k", value=5)
        await app.send("orders-us", key="k", value=7)
        await wait_for(lambda: len(seen) == 2, 10, message="both topics read")
        assert sorted(seen) == [("orders-eu", 5), ("orders-us", 7)] and totals["k"] == 12
        topology = app.runtime.topology
        [node] = topology.agents
        assert node.reads[:2] == ("orders-eu", "orders-us") and set(topology.copartitioned) >= {"orders-eu", "orders-us"}


def test_fausts_table_options_are_refused_with_the_way(tmp_path):
    app = make_app("table-options", tmp_path)
    assert app.Table("plain", default=int, use_partitioner=False) is not None  # Faust's default value: accepted
    for option, value, why in (("use_partitioner", True, "group_by"), ("window", object(), ".tumbling"),
                               ("changelog_topic", "x", "declared with app.topic")):
        with pytest.raises(faust.ConfigurationError, match=why):
            app.Table(f"t-{option}", **{option: value})
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        app.GlobalTable("g", colour="red")


async def test_one_worker_of_a_group_leads_and_the_leader_takes_no_partition_of_its_own(tmp_path):
    """Faust's leader election: exactly one worker of the group is the leader; a leader topic
    partition counted next to the inputs let balancing assignors split 4 inputs 1 and 3."""
    name = f"lead-{uuid.uuid4().hex[:6]}"
    apps = [faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                      data_dir=str(tmp_path / tag)) for tag in "ab"]
    for app in apps:
        words = app.topic("words", partitions=4)

        @app.agent(words)
        async def count(stream):
            async for _ in stream:
                pass

    async with apps[0].running(), apps[1].running():
        await wait_for(lambda: all(len(a.runtime.assigned) == 2 for a in apps), 10, message="2 partitions each")
        assert all(tp.topic == "words" for a in apps for tp in a.runtime.assigned)
        assert [bool(a.is_leader) for a in apps].count(True) == 1
    alone = make_app(f"timers-only-{uuid.uuid4().hex[:6]}", tmp_path / "c")  # no agent: the leader topic
    async with alone.running():
        await wait_for(lambda: bool(alone.is_leader), 10, message="the only worker leads")
        assert alone.runtime.assigned == {TP(alone.leader_topic.name, 0)}
