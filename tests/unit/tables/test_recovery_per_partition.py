# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Recovery is per partition: a small table partition serves while a big one still restores,
and a rebalance does not re-read partitions that finished."""
from __future__ import annotations

import asyncio
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker, MemoryConsumer

PARTITIONS = 8


def build(name, tmp_path, tag):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag))
    words = app.topic("words", key_type=str, value_type=str, partitions=PARTITIONS)
    counts = app.Table("counts", default=int)
    seen: list[tuple[int, str]] = []

    @app.agent(words)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1
            seen.append((event.partition, event.key))

    return app, words, counts, seen


def keys_by_partition(table, n_keys=400):
    by: dict[int, list[str]] = {}
    for i in range(n_keys):
        key = f"k{i}"
        by.setdefault(table.partition_of(key.encode()), []).append(key)
    return by


async def test_small_partitions_process_while_a_big_one_restores(tmp_path, monkeypatch):
    name = f"perpart-{uuid.uuid4().hex[:6]}"
    app, words, counts, seen = build(name, tmp_path, "a")
    by = keys_by_partition(counts)
    big = 0
    async with app.running():
        await wait_for(lambda: app.runtime.tables is not None and app.runtime.tables.ready and app.runtime.assigned, 10)
        for number, keys in by.items():  # partition 0 gets 10x the changelog of the others
            rounds = 10 if number == big else 1
            for _ in range(rounds):
                for key in keys:
                    await words.send(key=key, value="x")
                total = len(seen) + len(keys)
                await wait_for(lambda: len(seen) == total, 10)  # noqa: B023 - called within this same iteration
                await app.runtime.checkpoint.commit()  # one changelog record per key per round
    changelog = f"{name}-counts-changelog"
    big_tp = TP(changelog, big)
    gate = asyncio.Event()  # the big changelog partition returns nothing until the test opens it
    original = MemoryConsumer.getmany

    async def gated(self, timeout, max_records):
        if self.group_id is None and big_tp in self.assignment():
            (self.resume if gate.is_set() else self.pause)([big_tp])
        return await original(self, timeout, max_records)

    monkeypatch.setattr(MemoryConsumer, "getmany", gated)
    again, words2, counts2, seen2 = build(name, tmp_path, "b")  # memory store: recovers everything
    async with again.running():
        small = next(n for n in by if n != big)
        await wait_for(lambda: again.runtime.tables is not None and again.runtime.assigned, 10)
        await words2.send(key=by[small][0], value="x")
        await wait_for(lambda: (small, by[small][0]) in seen2, 10,
                       message="a record of a small partition processed while the big one restores")
        assert not counts2.local[big].ready and again.runtime.tables.progress.active
        assert counts2[by[small][0]] == 2  # its state was recovered before it processed
        # a rebalance mid-restore (same assignment): only the unfinished partition restores again
        rebalances = again.runtime.rebalances
        again.runtime.consumer.rejoin()
        await wait_for(lambda: again.runtime.rebalances > rebalances, 10, message="the rebalance")
        await wait_for(lambda: again.runtime.tables.progress.partitions == PARTITIONS, 10,
                       message="the new recovery took its end offsets")
        progress = again.runtime.tables.progress
        big_log = len(MemoryBroker.named(name).logs[changelog][big])
        assert progress.active and progress.total == big_log, (progress, big_log)  # nothing else re-read
        await words2.send(key=by[big][0], value="x")
        gate.set()
        await wait_for(lambda: (big, by[big][0]) in seen2, 10, message="the big partition's record, once recovered")
        assert counts2[by[big][0]] == 11
    broker = MemoryBroker.named(name)
    assert len(broker.logs[changelog][big]) >= 10 * len(by[big])


async def replay_fixture(name, records_per_partition):
    from streamkit.tables.stores import MemoryStore
    from streamkit.transport.memory import MemoryDriver

    driver = MemoryDriver(sk.App(name, broker=f"memory://{name}", driver="memory").conf)
    broker = driver.broker
    producer = driver.producer()
    await producer.start()
    tps = [TP(f"{name}-changelog", p) for p in range(len(records_per_partition))]
    broker.create_topic(tps[0].topic, len(tps))
    for tp, count in zip(tps, records_per_partition, strict=False):
        for i in range(count):
            await producer.send(tp.topic, f"k{i}".encode(), b"1", partition=tp.partition)
    await producer.flush()
    return driver, broker, {tp: MemoryStore() for tp in tps}


async def test_offsets_decide_when_a_partition_is_restored_not_a_quiet_period(monkeypatch):
    """Settle and idle periods far longer than the test's deadline: the replay still ends as
    soon as every partition's position reaches its end, even with ListOffsets under-reporting
    (the dev broker's "latest") and small fetches, and nothing of the tail is missed."""
    from streamkit.tables.recovery import RecoveryProgress, replay

    original = MemoryConsumer.getmany

    async def small_fetches(self, timeout, max_records):
        return await original(self, timeout, 3)

    monkeypatch.setattr(MemoryConsumer, "getmany", small_fetches)
    driver, broker, stores = await replay_fixture(f"exact-{uuid.uuid4().hex[:6]}", [50, 0, 7])
    broker.faults.end_offsets_short_by = 5
    done: list[TP] = []
    applied = await asyncio.wait_for(replay(driver, stores, RecoveryProgress(), done.append,
                                            settle=600, idle_limit=600), 10)
    assert applied == 57 and sorted(done) == sorted(stores)
    assert [len(list(store.items())) for store in stores.values()] == [50, 0, 7]


async def test_a_recovery_cut_short_by_the_worker_stopping_does_not_halt_it(tmp_path, monkeypatch):
    """An assignment that arrives while the consumer closes (cooperative rebalancing does this
    on Apache Kafka) starts a recovery whose broker calls fail with "handle destroyed": that
    is a clean stop, not a worker halting with an error."""
    name = f"stop-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(tmp_path),
                 commit_interval=0.05)
    source = app.topic("in", key_type=str, value_type=int, partitions=2)
    totals = app.Table("totals", default=int)

    @app.agent(source)
    async def add(stream):
        async for key, value in stream.items():
            totals[key] += value

    async with app.running():
        runtime = app.runtime
        manager = runtime.tables
        await wait_for(lambda: len(runtime.assigned) == 2, 10, message="both partitions assigned")

        async def closing(stores):
            runtime._stopping = True  # as on_stop sets it while the consumer closes
            raise RuntimeError("Failed to get committed offsets: Local: Broker handle destroyed for termination")

        monkeypatch.setattr(manager, "_blocks", closing)
        for table in app.tables.values():
            table.local.clear()  # every partition needs recovering again
        await manager.rebalanced(set(runtime.assigned))
        assert manager._recovering is not None
        await manager._recovering
        assert runtime.fatal is None and not runtime.failed.is_set()
