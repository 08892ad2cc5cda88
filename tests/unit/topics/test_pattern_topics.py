"""``app.topic(pattern=...)`` on the memory transport: an agent reads every topic whose whole
name matches, as found on the broker when the worker starts."""
from __future__ import annotations

import logging
import uuid

import pytest

import streamkit as faust
from streamkit.testing import wait_for


def memory_app(tmp_path, **settings):
    name = f"pat-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(tmp_path),
                     **settings)


async def make_topics(app, *names, partitions=2):
    for name in names:
        await faust.Topic(app, name, partitions=partitions).declare()


async def test_an_agent_reads_every_topic_matching_its_pattern(tmp_path, caplog):
    app = memory_app(tmp_path)
    await make_topics(app, "orders-eu", "orders-us", "orders", "returns-eu")
    orders = app.topic(pattern=r"orders-.*", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)
    seen = []

    @app.agent(orders)
    async def total(stream):
        async for event in stream.events():
            totals[event.key] += event.value
            seen.append((event.topic, event.value))

    with caplog.at_level(logging.INFO, logger="streamkit"):
        async with app.running():
            assert orders.topics == ("orders-eu", "orders-us")
            for topic, n in (("orders-eu", 5), ("orders-us", 7), ("orders", 100), ("returns-eu", 1000)):
                await app.send(topic, key="k", value=n)
            await wait_for(lambda: len(seen) == 2, 10, message="both matching topics read")
            topology = app.runtime.topology
            [node] = topology.agents
            assert node.reads[:2] == ("orders-eu", "orders-us")
            assert {"orders-eu", "orders-us"} <= set(topology.copartitioned)
            assert app.tables["totals"].partitions == 2  # co-partitioned with the matched topics
            await app.send("orders-eu", key="k", value=1)  # positive marker after the unmatched sends
            await wait_for(lambda: len(seen) == 3, 10, message="the marker read")
            assert totals["k"] == 13
    assert sorted(seen) == [("orders-eu", 1), ("orders-eu", 5), ("orders-us", 7)]
    assert any("orders-.*" in r.getMessage() and "orders-eu, orders-us" in r.getMessage() for r in caplog.records)


async def test_a_pattern_matching_no_topic_at_start_is_refused(tmp_path):
    app = memory_app(tmp_path)
    await make_topics(app, "returns-eu")

    @app.agent(app.topic(pattern="orders-.*"))
    async def total(stream):
        async for _ in stream:
            pass

    with pytest.raises(faust.ConfigurationError, match="no topic on the broker matches"):
        async with app.running():
            pass


async def test_what_a_pattern_topic_cannot_do_is_refused(tmp_path):
    app = memory_app(tmp_path)
    pattern = app.topic(pattern="orders-.*")
    with pytest.raises(TypeError, match="send to one of them"):
        await pattern.send(value=1)
    with pytest.raises(faust.ConfigurationError, match="both a name and a pattern"):
        app.topic("orders", pattern="orders-.*")
    with pytest.raises(faust.ConfigurationError, match="partitions=.*not created"):
        app.topic(pattern="orders-.*", partitions=3)
    with pytest.raises(faust.ConfigurationError, match="not a valid regular expression"):
        app.topic(pattern="orders-(")


async def test_the_apps_own_topics_never_match(tmp_path):
    app = memory_app(tmp_path)
    await make_topics(app, "in-a")
    everything = app.topic(pattern=".*")
    app.Table("counts", default=int)

    @app.agent(everything)
    async def total(stream):
        async for _ in stream:
            pass

    async with app.running():
        assert everything.topics == ("in-a",)


async def test_streamkit_tables_says_a_pattern_decides_the_partitions(tmp_path):
    from streamkit.runtime.planning import partitions_text, table_partitions

    app = memory_app(tmp_path)
    app.Table("totals", default=int)

    @app.agent(app.topic(pattern="orders-.*"))
    async def total(stream):
        async for _ in stream:
            pass

    [count] = (await table_partitions(app)).values()
    assert (
        partitions_text(count, 8) == "decided at start from the topics matching 'orders-.*' (their count on the broker)"
    )


async def test_a_matching_topic_created_while_running_is_named_in_one_warning(tmp_path, caplog, monkeypatch):
    """What a pattern matches is settled at start; a matching topic created later is not read
    until a restart, and the worker says so, once per topic, naming it, the pattern and the agent."""
    from streamkit.runtime import pattern_watch

    monkeypatch.setattr(pattern_watch, "CHECK_INTERVAL", 0.05)
    app = memory_app(tmp_path)
    await make_topics(app, "orders-eu")

    @app.agent(app.topic(pattern=r"orders-.*"))
    async def count(stream):
        async for _ in stream:
            pass

    with caplog.at_level(logging.WARNING, logger="streamkit.topics"):
        async with app.running():
            watch = app.runtime.pattern_watch
            await make_topics(app, "returns-us")  # not matching: a positive marker for "said nothing"
            await make_topics(app, "orders-us")
            await wait_for(lambda: "orders-us" in watch.unread, 10, message="the new matching topic noticed")
            seen_at = watch.listings
            await wait_for(lambda: watch.listings >= seen_at + 2, 10, message="two more listings")
    lines = [r.getMessage() for r in caplog.records if "created after the worker started" in r.getMessage()]
    assert len(lines) == 1, lines  # once, not at every listing
    assert "'orders-us'" in lines[0] and "orders-.*" in lines[0] and "count" in lines[0] and "restart" in lines[0]
    assert set(watch.unread) == {"orders-us"}
