"""Settings users turn on, exercised on a broker: auto_offset_reset="latest" and standby replicas."""
from __future__ import annotations

import asyncio

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS
from tests.helpers import word_counter


def make_app(name, broker_address, driver, **settings):
    return sk.App(name, broker=broker_address, driver=driver, web_enabled=False, **{**TEST_CONSUMER_SETTINGS, **settings})


def produce_one_by_one(address: str, topic: str, values: list[bytes]) -> None:
    """Each record its own batch: the dev broker's "latest" offset is the last batch's base + 1."""
    producer = Producer({"bootstrap.servers": address, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, partition=0)
        producer.flush(15)


async def test_auto_offset_reset_latest_starts_after_what_was_there(broker_address, driver, unique):
    app = make_app(f"latest-{unique}", broker_address, driver, auto_offset_reset="latest")
    events = app.topic(f"latest-in-{unique}", partitions=1)
    seen: list[bytes] = []

    @app.agent(events)
    async def collect(stream):
        async for value in stream:
            seen.append(value)

    admin = AdminClient({"bootstrap.servers": broker_address})  # the topic exists, written by others
    admin.create_topics([NewTopic(events.name, 1, 1)])[events.name].result(15)
    await asyncio.to_thread(produce_one_by_one, broker_address, events.name, [b'"before-1"', b'"before-2"'])
    async with app.running():
        await wait_for(lambda: app.runtime.assigned, 30, message="the group assigned the partition")
        # The position is resolved ("latest") at the first fetch after the assignment: a marker
        # sent before that is skipped too, so send markers until one arrives.
        for attempt in range(30):
            await asyncio.to_thread(produce_one_by_one, broker_address, events.name, [f'"after-{attempt}"'.encode()])
            try:
                await wait_for(lambda: seen, 1.0)
                break
            except TimeoutError:
                continue
        await wait_for(lambda: seen, 1.0, message="a record sent after the start")
    assert seen and all(v.startswith("after-") for v in seen), seen  # nothing from before the start


def standby_copies_match(apps, table_of):
    """Every standby store holds what the partition's owner counted (decoded as the table does)."""
    owned = {n: app for app in apps for n in table_of(app).local}
    for app in apps:
        table = table_of(app)
        for tp, store in app.runtime.tables.tailer.stores.items():
            copy = dict(table.entries.decode(k, raw) for k, raw in store.items())
            owner = owned.get(tp.partition)
            if owner is None or not copy or copy != {k: v for k, v in table_of(owner).items()
                                                     if table.partition_of(table.key_codec.encode(k)) == tp.partition}:
                return False
    return True


async def test_standby_replicas_on_a_broker_put_a_leaving_owners_partitions_on_warm_copies(broker_address, driver,
                                                                                           unique, tmp_path):
    """3 workers, one standby each partition: when one leaves, each partition it owned goes to
    the worker that kept its standby, which replays nothing (the copy is current)."""
    name = f"standby-{unique}"
    partitions = 6

    def worker(tag):
        app = make_app(name, broker_address, driver, table_standby_replicas=1, data_dir=str(tmp_path / tag))
        words, counts, seen = word_counter(app, f"standby-words-{unique}", partitions=partitions)
        return app, words, seen

    (a, words, seen_a), (b, _, seen_b), (c, _, seen_c) = worker("a"), worker("b"), worker("c")
    apps = [a, b, c]
    table_of = lambda app: app.tables["counts"]  # noqa: E731
    async with a.running(), b.running():
        async with c.running():
            def settled():
                if not all(x.runtime.tables is not None and x.runtime.tables.ready for x in apps):
                    return False
                owners = [n for x in apps for n in table_of(x).local]
                views = [x.runtime.membership.live() for x in apps]
                return (sorted(owners) == list(range(partitions)) and all(table_of(x).local for x in apps)
                        and all(len(v) == 3 for v in views))

            await wait_for(settled, 90, message="three workers own the partitions and see each other")
            for i in range(400):
                await words.send(key=f"w{i % 40}", value="x")
            await a.flush()
            await wait_for(lambda: len(seen_a) + len(seen_b) + len(seen_c) == 400, 60, message="every record counted")
            await wait_for(lambda: standby_copies_match(apps, table_of), 60,
                           message="every standby copy holds its owner's counts")
            leaving = sorted(table_of(c).local)
            assert leaving, "c owns some partitions"
            membership = a.runtime.membership
            warm = {n: membership.standbys("counts", n, 1, partitions)[0] for n in leaving}
            by_member = {x.runtime.membership.member_id: x for x in apps}
            before = {id(x): x.runtime.tables.replayed_total for x in (a, b)}
        # c left: its partitions move, each to the worker that kept it warm

        def taken_over():
            return all(x.runtime.tables.ready for x in (a, b)) and sorted(
                n for x in (a, b) for n in table_of(x).local) == list(range(partitions))

        await wait_for(taken_over, 90, message="a and b serve every partition")
        for n, member in warm.items():
            assert n in table_of(by_member[member]).local, f"partition {n} did not go to its warm standby {member}"
        assert [x.runtime.tables.replayed_total - before[id(x)] for x in (a, b)] == [0, 0], "a warm copy was replayed"
        counts = {k: v for x in (a, b) for k, v in table_of(x).items()}
        assert counts == {f"w{i}": 10 for i in range(40)}
