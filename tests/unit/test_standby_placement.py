"""table_standby_replicas=N is a count: each table partition is kept warm by N workers other than
its owner, placed the same way by every worker (membership claims, rendezvous hashing)."""
from __future__ import annotations

import uuid
from collections import Counter

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from tests.helpers import word_counter

PARTITIONS = 6


def worker(name, tmp_path, tag, replicas):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag), table_standby_replicas=replicas)
    word_counter(app, partitions=PARTITIONS)
    return app


def placement(apps, changelog):
    """(owners, standby holders) per changelog partition, as the workers' state says."""
    owners: dict[int, list[str]] = {n: [] for n in range(PARTITIONS)}
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
        answers = {tuple(a.runtime.membership.standbys("counts", n, 1)[0] for n in range(PARTITIONS)) for a in apps}
        assert len(answers) == 1, answers
        holders = {a.runtime.membership.member_id: {tp.partition for tp in a.runtime.tables.tailer.stores} for a in apps}
        for n, member in enumerate(next(iter(answers))):
            assert n in holders[member]
        assert TP(changelog, 0) in {tp for a in apps for tp in a.runtime.tables.tailer.stores}
