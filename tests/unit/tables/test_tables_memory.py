"""Tables on the in-memory driver: semantics, checkpoint batching, recovery, standbys, global."""
import uuid

import pytest

import streamkit as sk
from streamkit.runtime.dead_letters import HEADER_ERROR_TYPE
from streamkit.tables.marks import MARK_KEY
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def new_name():
    return f"tbl-{uuid.uuid4().hex[:6]}"


def build(name, tmp_path, tag="a", store="memory://", **settings):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store=store,
                 data_dir=str(tmp_path / tag), **{"commit_interval": 0.05, **settings})
    words = app.topic("words", key_type=str, value_type=str, partitions=4)
    counts = app.Table("counts", default=int)
    seen = []

    @app.agent(words)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1
            seen.append(event.key)

    return app, words, counts, seen


def changelog(app, table):
    """The table's changelog records, without the checkpoint marks (tables/marks.py)."""
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    return [m for part in broker.logs.get(table.changelog.name, []) for m in part if m.key != MARK_KEY]


def standbys_current(app, table, total):
    """The changelog holds all ``total`` counts and every standby store applied it to the end."""
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    latest = {m.key: int(m.value) for m in changelog(app, table)}
    stores = app.runtime.tables.tailer.stores
    return sum(latest.values()) == total and stores and all(
        (store.offset if store.offset is not None else -1) == len(broker.logs[tp.topic][tp.partition]) - 1
        for tp, store in stores.items())


async def send_words(topic, n, keys=20):
    for i in range(n):
        await topic.send(key=f"w{i % keys}", value="x")


async def test_dict_semantics_inside_and_outside_agents(tmp_path):
    app, words, counts, seen = build(new_name(), tmp_path)
    async with app.running():
        await send_words(words, 100)
        await wait_for(lambda: len(seen) == 100, 10)
        assert counts["w3"] == 5 and counts.get("nope") is None and "nope" not in counts
        assert dict(counts.items()) == {f"w{i}": 5 for i in range(20)}
        assert len(counts) == 20
        assert counts["nope"] == 0 and "nope" not in counts  # outside an agent's record a read stores nothing
        counts["w3"] = 42  # outside an agent: goes to the key's (local) partition
        assert counts["w3"] == 42
        del counts["w3"]
        assert "w3" not in counts
        assert counts.setdefault("w3", 7) == 7
        with pytest.raises(KeyError):
            del counts["never-there"]


async def test_n_writes_to_one_key_make_one_changelog_record(tmp_path):
    app, words, counts, seen = build(new_name(), tmp_path, commit_interval=3600)
    async with app.running():
        await send_words(words, 500, keys=1)
        await wait_for(lambda: len(seen) == 500, 10)
        await app.runtime.checkpoint.commit()
        records = changelog(app, counts)
        assert len(records) == 1 and records[0].value == b"500" and records[0].key == b"w0"
        await send_words(words, 10, keys=1)
        await wait_for(lambda: len(seen) == 510, 10)
        await app.runtime.checkpoint.commit()
        assert [m.value for m in changelog(app, counts)] == [b"500", b"510"]


async def test_writing_a_key_of_another_partition_to_a_strict_table_is_a_clear_error(tmp_path):
    name = new_name()
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 commit_interval=0.05, agent_retries=0)
    orders = app.topic("orders", key_type=str, value_type=dict, partitions=4)
    totals = app.Table("totals", default=float, key_partitioning="strict")

    @app.agent(orders)
    async def total(stream):
        async for order in stream:
            totals[order["user"]] += order["amount"]  # keyed by order id, not by user

    async with app.running():
        for i in range(40):
            await orders.send(key=f"order-{i}", value={"user": f"u{i % 3}", "amount": 1.0})
        await wait_for(lambda: app.runtime.errors.counts["dlq"] > 0, 10)
    dlq = MemoryBroker.named(name).logs[app.dlq_topic_name]
    types = {dict(m.headers)[HEADER_ERROR_TYPE] for part in dlq for m in part}
    assert types == {b"WrongPartition"}


async def test_recovery_from_the_changelog_into_an_empty_store(tmp_path):
    name = new_name()
    app, words, counts, seen = build(name, tmp_path)
    async with app.running():
        await send_words(words, 300)
        await wait_for(lambda: len(seen) == 300, 10)
    again, _, counts2, _ = build(name, tmp_path, tag="b")  # memory store: starts empty
    async with again.running():
        await wait_for(lambda: again.runtime.tables.ready and again.runtime.rebalances, 10)
        await wait_for(lambda: len(counts2) == 20, 10)
        assert dict(counts2.items()) == {f"w{i}": 15 for i in range(20)}
        records = MemoryBroker.named(again.conf.bootstrap_servers).logs[counts2.changelog.name]
        assert again.runtime.tables.replayed_total == sum(len(part) for part in records)  # marks included


async def test_rocksdb_restart_replays_only_the_tail(tmp_path):
    name = new_name()
    app, words, counts, seen = build(name, tmp_path, store="rocksdb://")
    async with app.running():
        await send_words(words, 2000, keys=500)
        await wait_for(lambda: len(seen) == 2000, 20)
    total_changelog = len(changelog(app, counts))
    again, words2, counts2, seen2 = build(name, tmp_path, store="rocksdb://")  # same data dir
    async with again.running():
        await wait_for(lambda: again.runtime.tables.ready and again.runtime.rebalances, 10)
        await send_words(words2, 20, keys=500)
        await wait_for(lambda: len(seen2) == 20, 10)
        assert counts2["w0"] == 5 and counts2["w499"] == 4
        replayed = again.runtime.tables.replayed_total
    assert replayed < total_changelog / 10, (replayed, total_changelog)


async def test_standby_replica_is_promoted_with_only_the_tail(tmp_path):
    name = new_name()
    a, words, counts_a, seen_a = build(name, tmp_path, "a", table_standby_replicas=1)
    b, _, counts_b, seen_b = build(name, tmp_path, "b", table_standby_replicas=1)
    async with a.running():
        async with b.running():
            await wait_for(lambda: a.runtime.assigned and b.runtime.assigned, 10)
            await send_words(words, 400, keys=40)
            await wait_for(lambda: len(seen_a) + len(seen_b) == 400, 10)
            await wait_for(lambda: standbys_current(a, counts_a, 400) and standbys_current(b, counts_b, 400), 10,
                           message="a checkpoint, then each standby tailer caught up")
            before = a.runtime.tables.replayed_total
            assert b.runtime.tables.tailer.applied > 0 and a.runtime.tables.tailer.applied > 0
        # b left: a takes over b's partitions; its standby copies mean (almost) nothing to replay
        await wait_for(lambda: len(counts_a) == 40, 10, message="a serves every key")
        assert dict(counts_a.items()) == {f"w{i}": 10 for i in range(40)}
        assert a.runtime.tables.replayed_total - before < 40


async def test_global_table_write_on_one_worker_is_read_on_the_other(tmp_path):
    name = new_name()

    def build_global(tag):
        app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     data_dir=str(tmp_path / tag), commit_interval=0.05)
        settings = app.GlobalTable("settings", partitions=2)
        return app, settings

    a, sa = build_global("a")
    b, sb = build_global("b")
    async with a.running(), b.running():
        await wait_for(lambda: a.runtime.tables.ready and b.runtime.tables.ready, 10)
        sa["colour"] = "blue"
        sb["size"] = 3
        await wait_for(lambda: sb.get("colour") == "blue" and sa.get("size") == 3, 5,
                       message="writes visible on the other worker")
