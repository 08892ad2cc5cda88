# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""table_standby_replicas=N is a count: each table partition is kept warm by N workers other than
its owner, placed the same way by every worker (membership claims, rendezvous hashing)."""
from __future__ import annotations

import uuid
from collections import Counter

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker
from tests.helpers import memory_word_counters, word_counter

PARTITIONS = 6


def worker(name, tmp_path, tag, replicas, partitions=PARTITIONS):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag), table_standby_replicas=replicas)
    word_counter(app, partitions=partitions)
    return app


def placement(apps, changelog, partitions=PARTITIONS):
    """(owners, standby holders) per changelog partition, as the workers' state says."""
    owners: dict[int, list[str]] = {n: [] for n in range(partitions)}
    tailed: Counter = Counter()
    for app in apps:
        tables = app.runtime.tables
        for n in app.tables["counts"].local:
            owners[n].append(app.runtime.membership.member_id)
        for tp in tables.tailer.stores:
            tailed[tp.partition] += 1
            assert tp.partition not in app.tables["counts"].local, f"the owner of {tp} also tails it"
    return owners, tailed


async def test_three_workers_one_standby_each_partition_tailed_by_exactly_one_non_owner(tmp_path):
    name = f"standby-{uuid.uuid4().hex[:6]}"
    apps = [worker(name, tmp_path, tag, replicas=1) for tag in "abc"]
    changelog = f"{name}-counts-changelog"
    async with apps[0].running(), apps[1].running(), apps[2].running():
        def placed():
            if not all(a.runtime.tables is not None and a.runtime.tables.ready for a in apps):
                return False
            if sum(len(a.runtime.membership.live()) for a in apps) != 9:  # everyone sees everyone
                return False
            owners, tailed = placement(apps, changelog)
            return all(len(o) == 1 for o in owners.values()) and all(tailed[n] == 1 for n in range(PARTITIONS))

        await wait_for(placed, 20, message="one owner and exactly one standby per partition")
        _, tailed = placement(apps, changelog)
        assert sum(tailed.values()) == PARTITIONS  # not every non-owned partition on every worker
        # every worker computes the same standby for each partition
        answers = {tuple(a.runtime.membership.standbys("counts", n, 1, PARTITIONS)[0] for n in range(PARTITIONS))
                   for a in apps}
        assert len(answers) == 1, answers
        holders = {a.runtime.membership.member_id: {tp.partition for tp in a.runtime.tables.tailer.stores} for a in apps}
        for n, member in enumerate(next(iter(answers))):
            assert n in holders[member]
        assert TP(changelog, 0) in {tp for a in apps for tp in a.runtime.tables.tailer.stores}


def standby_copies_current(apps, changelog):
    """Every standby store applied its changelog partition to the end."""
    broker = MemoryBroker.named(apps[0].conf.bootstrap_servers)
    logs = broker.logs.get(changelog, [])
    return all((store.offset if store.offset is not None else -1) == len(logs[tp.partition]) - 1
               for a in apps for tp, store in a.runtime.tables.tailer.stores.items())


async def test_when_an_owner_leaves_each_of_its_partitions_goes_to_the_worker_holding_its_warm_standby(tmp_path):
    """KIP-441's point: a failover lands on a caught-up copy. The assignor decides where a
    partition goes, so the standby must already be there: no partition is replayed from zero."""
    name = f"handover-{uuid.uuid4().hex[:6]}"
    partitions = 12  # the leaver owns 4: placement by chance would match all 4 one time in 16
    apps = [worker(name, tmp_path, tag, replicas=1, partitions=partitions) for tag in "abc"]
    words = apps[0].topic("words", key_type=str, value_type=str)
    changelog = f"{name}-counts-changelog"
    async with apps[0].running(), apps[1].running():
        victim = apps[2]
        async with victim.running():
            def placed():
                if not all(a.runtime.tables is not None and a.runtime.tables.ready for a in apps):
                    return False
                views = [a.runtime.membership.live() for a in apps]
                if any(len(v) != 3 for v in views):
                    return False
                owners, tailed = placement(apps, changelog, partitions)
                return all(len(o) == 1 for o in owners.values()) and all(tailed[n] == 1 for n in range(partitions))

            await wait_for(placed, 20, message="one owner and exactly one standby per partition")
            for i in range(480):
                await words.send(key=f"w{i % 120}", value="x")
            await wait_for(lambda: sum(len(a.tables["counts"]) for a in apps) == 120
                           and standby_copies_current(apps, changelog), 20,
                           message="every key counted and every standby copy current")
            leaving = sorted(victim.tables["counts"].local)
            assert len(leaving) == 4, leaving
            membership = apps[0].runtime.membership
            warm = {n: membership.standbys("counts", n, 1, partitions)[0] for n in leaving}
            by_member = {a.runtime.membership.member_id: a for a in apps}
            replayed = {id(a): a.runtime.tables.replayed_total for a in apps[:2]}
        survivors = apps[:2]

        def taken_over():
            return all(any(n in a.tables["counts"].local and a.runtime.tables.ready for a in survivors)
                       for n in range(partitions))

        await wait_for(taken_over, 20, message="the survivors serve every partition")
        for n, member in warm.items():
            assert n in by_member[member].tables["counts"].local, (
                f"partition {n} did not move to {member}, the worker holding its warm copy")
        assert all(a.runtime.tables.replayed_total == replayed[id(a)] for a in survivors), (
            "a survivor replayed changelog records: the partitions it took over were not warm")
        counts = {k: v for a in survivors for k, v in a.tables["counts"].items()}
        assert counts == {f"w{i}": 4 for i in range(120)}


def claims(membership, at, **tables):
    for member, numbers in tables.items():
        membership._record({"member": member, "url": None, "tables": {"counts": numbers}, "at": at})


def test_standbys_follow_range_over_the_members_in_the_order_their_claims_show():
    import time

    from streamkit.runtime.membership import Membership

    membership = Membership(driver=None, topic="t", send=None, range_failover=True)
    now = time.time()
    claims(membership, now - 2, a=[0, 1, 2, 3], b=[4, 5, 6, 7], c=[8, 9, 10, 11])
    # b gone: range over a, c gives a 0-5 and c 6-11; a and c gone too, deeper standbys follow
    assert [membership.standbys("counts", n, 1, 12) for n in (4, 5, 6, 7)] == [["a"], ["a"], ["c"], ["c"]]
    assert membership.standbys("counts", 0, 2, 12) == ["b", "c"]  # b takes 0-5 of (b, c); then c
    # c crashed and its claim is stale: a and b took over; c's old claim no longer ranks it
    claims(membership, now - 1, a=[0, 1, 2, 3, 4, 5], b=[6, 7, 8, 9, 10, 11])
    assert membership.standbys("counts", 0, 1, 12) == ["b"] and membership.standbys("counts", 9, 1, 12) == ["a"]
    # a member serving nothing yet: the order is not visible, placement falls back to hashing
    claims(membership, now, d=[])
    fallback = membership.standbys("counts", 0, 1, 12)
    assert len(fallback) == 1 and fallback[0] != "a"


async def test_a_standby_store_given_up_is_closed_only_after_the_tailer_lets_go_of_it(tmp_path):
    """Placement moved a standby away: its store was closed first and the tailer stopped after,
    so for that await the tailer (and anything reading its stores) held a closed store."""
    apps = memory_word_counters(f"letgo-{uuid.uuid4().hex[:6]}", tmp_path, partitions=2, store="rocksdb://",
                                table_standby_replicas=1)
    async with apps[0].running(), apps[1].running():
        def placed():
            return all(a.runtime.tables is not None and a.runtime.tables.ready and a.runtime.tables.tailer.stores
                       and len(a.runtime.membership.live()) == 2 for a in apps)

        await wait_for(placed, 20, message="each worker owns one partition and keeps the other warm")
        tables = apps[0].runtime.tables
        tailer = tables.tailer
        [standby] = tailer.stores.values()
        closed_while_held: list[bool] = []
        stop = tailer.stop

        async def noted_stop():
            closed_while_held.append(any(s._db is None for s in tailer.stores.values()))
            await stop()

        tailer.stop = noted_stop
        tables._standby_stores = lambda: {}  # placement moved the standby to another worker
        await tables._retail()
        assert closed_while_held == [False], "the tailer still held the store when it was closed"
        assert standby._db is None and not tailer.stores  # given up, and closed after all
