"""How a table's partition count is chosen (memory driver), with apps written the way users write them.

A table without ``partitions=`` takes the partition count of the topics its app's agents read
(declared, or as the broker has it); when those disagree, or a declared count matches none of
them, the worker refuses to start with an error saying what to change.
"""
import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker
from tests.helpers import word_counter

USERS = [f"user-{i}" for i in range(40)]


def new_app(**settings):
    name = f"tp-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                  **{"commit_interval": 0.05, **settings})


def broker_of(app):
    return MemoryBroker.named(app.conf.bootstrap_servers)


def log_of(app, topic):
    return [m for part in broker_of(app).logs.get(topic, []) for m in part]


class Click(sk.Record):
    user: str
    page: str


async def send_clicks(topic, n):
    """Keyed by page (not by user): only a group_by makes the user the key."""
    for i in range(n):
        await topic.send(key=f"page-{i % 7}", value=Click(USERS[i % len(USERS)], f"page-{i % 7}"))


async def test_a_plain_table_takes_its_source_topics_partition_count(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    clicks, counts, seen = word_counter(app, "clicks", partitions=6, value_type=int)
    async with app.running():
        for i in range(600):
            await clicks.send(key=USERS[i % len(USERS)], value=i)
        await wait_for(lambda: len(seen) == 600, 10, message="every click counted")
        assert dict(counts.items()) == {user: 15 for user in USERS}
        await app.runtime.checkpoint.commit()
        assert counts.partitions == 6
        assert len(broker_of(app).logs[counts.changelog.name]) == 6
        assert log_of(app, app.dlq_topic_name) == []


async def test_an_existing_topic_gives_its_count_from_the_broker(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    broker_of(app).create_topic("clicks", 6)  # created by someone else; the app does not declare a count
    clicks, counts, seen = word_counter(app, "clicks", value_type=int)
    async with app.running():
        for i in range(300):
            await clicks.send(key=USERS[i % len(USERS)], value=i)
        await wait_for(lambda: len(seen) == 300, 10)
        assert sum(counts.values()) == 300 and counts.partitions == 6
        assert log_of(app, app.dlq_topic_name) == []


async def test_group_by_of_an_existing_topic_repartitions_to_its_count(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    broker_of(app).create_topic("clicks", 6)
    clicks = app.topic("clicks", key_type=str, value_type=Click)
    per_user = app.Table("per-user", default=int)
    seen = []

    @app.agent(clicks)
    async def count(stream):
        async for click in stream.group_by(Click.user):
            per_user[click.user] += 1
            seen.append(click.user)

    async with app.running():
        await send_clicks(clicks, 400)
        await wait_for(lambda: len(seen) == 400, 10)
        assert dict(per_user.items()) == {user: 10 for user in USERS}
        assert per_user.partitions == 6
        assert len(broker_of(app).logs[f"{app.id}-count-user-repartition"]) == 6
        assert log_of(app, app.dlq_topic_name) == []


async def test_a_declared_count_matching_a_group_by_topic_is_accepted(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    clicks = app.topic("clicks", key_type=str, value_type=Click, partitions=6)
    per_user = app.Table("per-user", default=int, partitions=4)
    seen = []

    @app.agent(clicks)
    async def count(stream):
        async for click in stream.group_by(Click.user, partitions=4):
            per_user[click.user] += 1
            seen.append(click.user)

    async with app.running():
        await send_clicks(clicks, 200)
        await wait_for(lambda: len(seen) == 200, 10)
        assert sum(per_user.values()) == 200
        assert log_of(app, app.dlq_topic_name) == []


async def test_a_declared_count_no_source_topic_has_fails_at_startup(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    clicks = app.topic("clicks", key_type=str, value_type=int, partitions=6)
    counts = app.Table("counts", default=int, partitions=4)

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1

    with pytest.raises(sk.ConfigurationError) as info:
        await app.start()
    message = str(info.value)
    assert "'counts'" in message and "4 partitions" in message and "'clicks' has 6" in message
    assert "partitions=6" in message and "group_by" in message
    assert app.runtime is None
    assert f"{app.id}-counts-changelog" not in broker_of(app).logs  # nothing created with a wrong count


async def test_source_topics_that_disagree_fail_an_undeclared_table_at_startup(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    clicks = app.topic("clicks", key_type=str, value_type=int, partitions=6)
    views = app.topic("views", key_type=str, value_type=int, partitions=4)
    counts = app.Table("counts", default=int)

    @app.agent(clicks)
    async def count_clicks(stream):
        async for event in stream.events():
            counts[event.key] += 1

    @app.agent(views)
    async def count_views(stream):
        async for event in stream.events():
            counts[event.key] += 1

    with pytest.raises(sk.ConfigurationError) as info:
        await app.start()
    message = str(info.value)
    assert "'counts'" in message and "'clicks' has 6" in message and "'views' has 4" in message
    assert "partitions=" in message and "group_by" in message
    assert f"{app.id}-counts-changelog" not in broker_of(app).logs


async def test_a_table_declaring_one_of_the_counts_is_fine_when_sources_disagree(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    clicks = app.topic("clicks", key_type=str, value_type=int, partitions=6)
    app.topic("views", key_type=str, value_type=int, partitions=4)
    counts = app.Table("counts", default=int, partitions=6)
    seen = []

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1
            seen.append(event.key)

    @app.agent("views")
    async def ignore(stream):
        async for _ in stream:
            pass

    async with app.running():
        for i in range(60):
            await clicks.send(key=USERS[i % len(USERS)], value=i)
        await wait_for(lambda: len(seen) == 60, 10)
        assert sum(counts.values()) == 60


async def test_global_tables_are_exempt(tmp_path):
    app = new_app(data_dir=str(tmp_path), topic_partitions=3)
    clicks = app.topic("clicks", key_type=str, value_type=int, partitions=6)
    app.topic("views", key_type=str, value_type=int, partitions=4)
    flags = app.GlobalTable("flags", default=bool)
    seen = []

    @app.agent(clicks)
    async def flag(stream):
        async for event in stream.events():
            flags[event.key] = True
            seen.append(event.key)

    @app.agent("views")
    async def ignore(stream):
        async for _ in stream:
            pass

    async with app.running():
        # (a global table recovers on its own schedule: wait for it, so no write meets it recovering)
        await wait_for(lambda: app.runtime.rebalances and app.runtime.tables.ready, 10)
        for i in range(30):
            await clicks.send(key=USERS[i], value=i)
        await wait_for(lambda: len(seen) == 30, 10)
        assert flags.partitions == 3 and len(broker_of(app).logs[flags.changelog.name]) == 3


async def test_an_existing_changelog_with_another_count_is_still_a_topic_mismatch(tmp_path):
    app = new_app(data_dir=str(tmp_path))
    clicks = app.topic("clicks", key_type=str, value_type=int, partitions=6)
    broker_of(app).create_topic(f"{app.id}-counts-changelog", 8)  # left by an earlier deployment
    counts = app.Table("counts", default=int)

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1

    with pytest.raises(sk.TopicMismatch, match="exists with 8 partitions but is declared with 6"):
        await app.start()
