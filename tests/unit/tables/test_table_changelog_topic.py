"""``app.Table(..., changelog_topic=topic)``: the table's changelog is a topic the app declared,
as in a widely forked Faust course template whose whole output is that topic."""
from __future__ import annotations

import logging
import uuid

import orjson
import pytest

import streamkit as faust
from streamkit.errors import ConfigurationError
from streamkit.tables.marks import MARK_KEY
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def new_name() -> str:
    return f"cltopic-{uuid.uuid4().hex[:6]}"


def build(name, tmp_path, tag="a", **settings):
    """The template: clicks counted per page into a table whose changelog is the output topic."""
    app = faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                    data_dir=str(tmp_path / tag), **{"commit_interval": 0.05, **settings})
    clicks = app.topic("clicks", key_type=str, value_type=int, partitions=4)
    page_counts = app.topic("page-counts", key_type=str, value_type=int)
    counts = app.Table("counts", default=int, changelog_topic=page_counts)
    seen = []

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += event.value
            seen.append(event.key)

    return app, clicks, page_counts, counts, seen


def output(name: str) -> list:
    broker = MemoryBroker.named(f"{name}")
    return [m for part in broker.logs.get("page-counts", []) for m in part]


def latest(name: str) -> dict[bytes, int]:
    return {m.key: orjson.loads(m.value) for m in sorted(output(name), key=lambda m: m.offset)}


def test_the_table_changelog_is_the_declared_topic(tmp_path):
    app, _, page_counts, counts, _ = build(new_name(), tmp_path)
    assert counts.changelog_topic is page_counts
    assert page_counts.config["cleanup.policy"] == "compact"  # created compacted
    # reset deletes internal topics only: not a topic the user declared and others may read
    assert "page-counts" not in app.derived_topics(["page-counts"])
    other = app.Table("other", default=int)
    assert other.changelog.name in app.derived_topics([])


async def test_counts_reach_the_topic_and_a_restarted_worker_recovers_from_it(tmp_path):
    name = new_name()
    app, clicks, _, counts, seen = build(name, tmp_path)
    async with app.running():
        for page, n in (("home", 1), ("cart", 2), ("home", 2)):
            await clicks.send(key=page, value=n)
        await wait_for(lambda: latest(name) == {b"home": 3, b"cart": 2}, 10, message="the counts in the topic")
    assert output(name) and not [m for m in output(name) if m.key == MARK_KEY]  # readers see counts only
    assert MemoryBroker.named(name).topic_configs["page-counts"] == {"cleanup.policy": "compact"}

    again, clicks, _, counts, seen = build(name, tmp_path, tag="b")  # another worker, empty memory store
    async with again.running():
        await clicks.send(key="home", value=10)
        await wait_for(lambda: seen == ["home"], 10)
        await wait_for(lambda: latest(name).get(b"home") == 13, 10, message="13: 3 recovered from the topic, +10")
        assert counts["cart"] == 2


async def test_a_standby_applies_the_topic(tmp_path):
    name = new_name()
    a, clicks, _, counts_a, seen_a = build(name, tmp_path, "a", table_standby_replicas=1)
    b, _, _, counts_b, seen_b = build(name, tmp_path, "b", table_standby_replicas=1)
    async with a.running():
        async with b.running():
            await wait_for(lambda: a.runtime.assigned and b.runtime.assigned, 10)
            for i in range(40):
                await clicks.send(key=f"p{i % 8}", value=1)
            await wait_for(lambda: len(seen_a) + len(seen_b) == 40, 10)
            await wait_for(lambda: a.runtime.tables.tailer.applied > 0 and b.runtime.tables.tailer.applied > 0, 10,
                           message="each standby applied records of the topic")
        await wait_for(lambda: len(counts_a) == 8, 10, message="a serves every key")
        assert dict(counts_a.items()) == {f"p{i}": 5 for i in range(8)}


async def test_an_existing_topic_without_compaction_is_warned_of(tmp_path, caplog):
    name = new_name()
    broker = MemoryBroker.named(name)
    broker.create_topic("page-counts", 4)
    broker.topic_configs["page-counts"] = {"cleanup.policy": "delete"}
    app, *_ = build(name, tmp_path)
    with caplog.at_level(logging.WARNING):
        async with app.running():
            pass
    warned = [r.getMessage() for r in caplog.records if "page-counts" in r.getMessage()]
    assert len(warned) == 1 and "cleanup.policy=compact" in warned[0], warned


def test_what_cannot_be_a_changelog_is_refused(tmp_path):
    app = faust.App(new_name(), broker="memory://x", driver="memory")
    deleting = app.topic("deleting", config={"cleanup.policy": "delete"})
    with pytest.raises(ConfigurationError, match="cleanup.policy"):
        app.Table("a", changelog_topic=deleting)
    four = app.topic("four", partitions=4)
    with pytest.raises(ConfigurationError, match="partitions"):
        app.Table("b", partitions=2, changelog_topic=four)
    app.Table("c", changelog_topic=four)
    with pytest.raises(ConfigurationError, match="already the changelog of table 'c'"):
        app.Table("d", changelog_topic=four)
    with pytest.raises(ConfigurationError, match="app.topic"):
        app.Table("e", changelog_topic="four")
    windowed = app.Table("w", changelog_topic=app.topic("windows"))
    with pytest.raises(ConfigurationError, match="on_window_close"):
        windowed.tumbling(60)
    typed = app.topic("typed", value_type=int)
    with pytest.raises(ConfigurationError, match="value_type"):
        app.Table("f", value_type=str, changelog_topic=typed)


RESET_MODULE = '''
import streamkit as faust

app = faust.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False, store="memory://",
                data_dir={data!r}, commit_interval=0.05)
clicks = app.topic("clicks", key_type=str, value_type=int, partitions=2)
page_counts = app.topic("page-counts", key_type=str, value_type=int)
counts = app.Table("counts", default=int, changelog_topic=page_counts)
other = app.Table("other", default=int)


@app.agent(clicks)
async def count(stream):
    async for event in stream.events():
        counts[event.key] += event.value
        other[event.key] += 1
'''


def test_reset_keeps_a_declared_changelog_and_says_so(tmp_path, monkeypatch):
    import asyncio
    import sys

    from click.testing import CliRunner

    from streamkit.cli.main import cli

    name = new_name()
    module = name.replace("-", "_")
    (tmp_path / f"{module}.py").write_text(RESET_MODULE.format(name=name, data=str(tmp_path / "data")))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        app = __import__(module).app

        async def go() -> None:
            async with app.running():
                await app.topics["clicks"].send(key="home", value=2)
                await wait_for(lambda: latest(name) == {b"home": 2}, 10, message="the count in the topic")
        asyncio.run(go())
        broker = MemoryBroker.named(name)
        assert f"{app.id}-other-changelog" in broker.logs
        done = CliRunner().invoke(cli, ["reset", "-A", f"{module}:app", "--yes"])
        assert done.exit_code == 0, done.output
        assert f"{app.id}-other-changelog" not in broker.logs  # the internal changelog went
        assert latest(name) == {b"home": 2}  # the declared one stays, with its records
        kept = [line for line in done.output.splitlines() if "page-counts" in line]
        assert kept and "keeps" in kept[0] and "counts" in kept[0], done.output
    finally:
        sys.modules.pop(module, None)
        MemoryBroker.forget(name)
