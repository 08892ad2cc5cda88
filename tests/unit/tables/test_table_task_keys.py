# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""A key written from a record of another partition than its own lives in that record's
partition (its task), as Faust and Kafka Streams keep it; ``key_partitioning="strict"`` refuses."""
import logging
import uuid

import pytest

import streamkit as sk
from streamkit.errors import ConfigurationError
from streamkit.runtime.event import Event, processing
from streamkit.tables.task_keys import WrongPartition
from streamkit.testing import wait_for
from streamkit.transport.base import Message
from streamkit.transport.partitioner import partition_for_key


def table(**options):
    app = sk.App(f"task-{uuid.uuid4().hex[:6]}", broker="memory://task", driver="memory", web_enabled=False)
    counts = app.Table("counts", partitions=4, **options)
    counts.serve_in_memory()
    return counts


def in_record_of(partition):
    processing.set(Event(None, None, Message("src", partition, 0, None, None, [], 0)))


@pytest.fixture(autouse=True)
def no_record_after():
    yield
    processing.set(None)


def test_a_key_written_from_another_partitions_record_lives_in_that_partition(caplog):
    counts = table(default=int)
    own = counts.key_partition("counter")
    others = [n for n in range(4) if n != own]
    for n in others:
        in_record_of(n)
        counts["counter"] += 1
        counts["counter"] += n  # the task reads back what it wrote
        assert counts["counter"] == 1 + n and "counter" in counts and counts.get("counter") == 1 + n
    for n in others:
        assert counts.local[n].cache == {b"counter": 1 + n}  # its shard: its changelog partition
    assert b"counter" not in counts.local[own].cache
    processing.set(None)
    assert "counter" not in counts  # outside a record: the key's own partition
    warned = [r for r in caplog.records if "not in the partition its key hashes to" in r.getMessage()]
    assert len(warned) == 1 and "'counts'" in warned[0].getMessage()  # once per table


def test_each_task_has_its_own_entry_of_a_key_as_in_faust():
    counts = table(default=int)
    own = counts.key_partition("k")
    in_record_of(own)
    counts["k"] = 7
    in_record_of((own + 1) % 4)  # never copies the key's own partition's entry: no count twice
    assert counts.get("k") is None and "k" not in counts
    counts["k"] += 1
    assert counts.local[(own + 1) % 4].cache[b"k"] == 1 and counts.local[own].cache[b"k"] == 7


def test_delete_and_setdefault_act_in_the_records_partition():
    counts = table(default=int)
    other = (counts.key_partition("k") + 1) % 4
    in_record_of(other)
    assert counts.setdefault("k", 3) == 3
    del counts["k"]
    assert "k" not in counts and counts["k"] == 0


def test_strict_key_partitioning_still_refuses_the_write():
    counts = table(default=int, key_partitioning="strict")
    in_record_of((counts.key_partition("k") + 1) % 4)
    with pytest.raises(WrongPartition, match="key_partitioning='strict'"):
        counts["k"] += 1
    with pytest.raises(WrongPartition):
        counts["k"] = 1


def test_a_windowed_table_counts_a_constant_key_in_each_records_partition():
    app = sk.App(f"task-{uuid.uuid4().hex[:6]}", broker="memory://task", driver="memory", web_enabled=False)
    windows = app.Table("w", default=int, partitions=4).tumbling(10)
    strict = app.Table("s", default=int, partitions=4, key_partitioning="strict").tumbling(10)
    windows.table.serve_in_memory()
    strict.table.serve_in_memory()
    own = windows.table.key_partition("counter")
    for n in range(4):
        processing.set(Event(None, None, Message("src", n, 0, None, None, [], 1_000_000 + n)))
        windows["counter"] += 1
        assert windows["counter"].current() == 1
        if n != own:
            with pytest.raises(WrongPartition):
                strict["counter"] += 1
    processing.set(None)
    assert sum(v for (k, _), v in windows.table.items() if k == "counter") == 4


def test_an_unknown_key_partitioning_is_refused_with_the_choices():
    with pytest.raises(ConfigurationError, match="'task'.*'strict'"):
        table(key_partitioning="loose")


def test_a_write_from_a_partition_the_table_lacks_is_refused():
    counts = table(default=int)
    in_record_of(6)  # a topic with more partitions than the table
    with pytest.raises(WrongPartition, match="only 4 partitions"):
        counts["k"] = 1


async def test_a_restart_recovers_a_constant_key_into_each_records_partition(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    name = f"task-{uuid.uuid4().hex[:6]}"

    def build():
        app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     commit_interval=0.05)
        events = app.topic("events", key_type=str, value_type=int, partitions=4)
        totals = app.Table("totals", default=int)
        seen = []

        @app.agent(events)
        async def count(stream):
            async for value in stream:
                totals["all"] += value
                seen.append(totals["all"])

        return app, events, totals, seen

    app, events, totals, seen = build()
    async with app.running():
        for i in range(20):
            await events.send(key=f"e{i}", value=1)
        await wait_for(lambda: len(seen) == 20, 10)
        before = {n: totals.local[n].cache.get(b"all") or totals._read(b"all", totals.local[n]) for n in range(4)}
    assert sum(before.values()) == 20 and len([v for v in before.values() if v]) > 1  # several partitions wrote it
    per_partition = {n: sum(1 for i in range(20) if partition_for_key(f"e{i}".encode(), 4) == n) for n in range(4)}
    assert before == per_partition

    again, events2, totals2, seen2 = build()  # memory store: everything comes back from the changelog
    async with again.running():
        await wait_for(lambda: again.runtime.tables.ready and again.runtime.rebalances, 10)
        for n in range(4):
            await events2.send(key="x", value=1, partition=n)
        await wait_for(lambda: len(seen2) == 4, 10)
        assert sorted(seen2) == sorted(per_partition[n] + 1 for n in range(4))
