"""Warm-standby handover (aiokafka, classic protocol, streamkit's task assignor): when a worker
leaves, its tasks go to the workers that kept warm standbys of them (as long as that keeps the
group balanced), the others keep theirs, and the new owners replay only what their standby had
not applied yet."""
from __future__ import annotations

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS
from tests.helpers import word_counter

PARTITIONS = 6


def build(name, broker_address, tmp_path, tag):
    app = sk.App(name, broker=broker_address, driver="aiokafka", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag), commit_interval=0.2, table_standby_replicas=1,
                 **TEST_CONSUMER_SETTINGS)
    words, counts, seen = word_counter(app, topic=f"{name}-words", partitions=PARTITIONS)
    return app, words, counts, seen


def tasks_of(app):
    return set(app.tables["counts"].local)


def standbys_of(app):
    return {tp.partition for tp in app.runtime.tables.tailer.stores}


async def test_a_leaving_workers_tasks_move_to_their_warm_standbys(broker_address, unique, tmp_path):
    name = f"warm-{unique}"
    (a, words, _, seen_a), (b, _, _, seen_b), (c, _, _, seen_c) = [build(name, broker_address, tmp_path, t) for t in "abc"]
    apps = [a, b, c]
    async with a.running(), b.running():
        async with c.running():
            def placed():
                if not all(x.runtime.tables is not None and x.runtime.tables.ready and x.runtime.tasks.running
                           for x in apps):
                    return False
                owned = [tasks_of(x) for x in apps]
                warm = [standbys_of(x) for x in apps]
                return (sorted(n for o in owned for n in o) == list(range(PARTITIONS))
                        and sorted(n for w in warm for n in w) == list(range(PARTITIONS))
                        and all(not (o & w) for o, w in zip(owned, warm)))

            await wait_for(placed, 60, interval=0.2, message="one owner and one standby per partition")
            for i in range(600):
                await words.send(key=f"w{i % 60}", value="x")
            await a.flush()
            await wait_for(lambda: len(seen_a) + len(seen_b) + len(seen_c) >= 600, 60, message="600 counted")

            def standbys_caught_up():
                for holder in apps:
                    for tp, store in holder.runtime.tables.tailer.stores.items():
                        owner = next(x for x in apps if tp.partition in tasks_of(x))
                        if store.offset != owner.tables["counts"].local[tp.partition].store.offset:
                            return False
                return True

            await wait_for(standbys_caught_up, 30, message="standbys caught up with their owners' stores")
            before = {x.conf.data_dir: tasks_of(x) for x in (a, b)}
            warm = {x.conf.data_dir: standbys_of(x) for x in (a, b)}
            leaving = tasks_of(c)
            replayed = {x.conf.data_dir: x.runtime.tables.replayed_total for x in (a, b)}
        # c left: a and b share its tasks
        await wait_for(lambda: tasks_of(a) | tasks_of(b) == set(range(PARTITIONS)) and a.runtime.tasks.running
                       and b.runtime.tasks.running and a.runtime.tables.ready and b.runtime.tables.ready,
                       60, interval=0.2, message="the two remaining workers own every task")
        after = {x.conf.data_dir: tasks_of(x) for x in (a, b)}
        for worker, tasks in before.items():
            assert tasks <= after[worker], f"{worker} lost tasks it could keep: {tasks} -> {after[worker]}"
        fullest = max(len(t) for t in after.values())
        for n in leaving:
            holder = next(w for w, numbers in warm.items() if n in numbers)
            if len(after[holder]) < fullest or n in after[holder]:
                assert n in after[holder], f"task {n} did not go to its standby {holder}: {after}"
        went_warm = [n for n in leaving if any(n in after[w] and n in warm[w] for w in after)]
        assert went_warm, (leaving, warm, after)
        # a task that moved to its caught-up standby replays nothing (no record was written since)
        for worker in after:
            cold = [n for n in after[worker] - before[worker] if n not in warm[worker]]
            if not cold:
                assert {x.conf.data_dir: x.runtime.tables.replayed_total for x in (a, b)}[worker] == replayed[worker], \
                    f"{worker} replayed changelog records for tasks it held warm"
