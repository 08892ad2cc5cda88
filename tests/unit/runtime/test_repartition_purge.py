# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Repartition topics keep records of any age until processed, then the worker purges them.

A ``group_by`` record keeps its timestamp; under Kafka's default 7-day time retention a replay of
older data was deleted from the repartition topic before it was read (the broker's retention
check runs every 5 minutes) and the consumer skipped to the new log start: found on Apache
Kafka 4.1 by the join chaos test, whose records carry timestamps of 2026-01-01."""
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker


class Order(sk.Record):
    id: int
    user: str


def make_app(**settings):
    name = f"purge-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False,
                  **settings)


def build(app):
    orders = app.topic("orders", key_type=str, value_type=Order, partitions=2)
    seen = []

    @app.agent(orders)
    async def by_user(stream):
        async for order in stream.group_by(Order.user):
            seen.append(order.id)

    return orders, seen, f"{app.id}-by_user-user-repartition"


async def test_a_repartition_topic_keeps_records_of_any_age_and_is_purged_below_the_committed_offsets():
    app = make_app(repartition_purge_interval=0.1)
    orders, seen, repartition = build(app)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    async with app.running():
        assert app.topics[repartition].config == {"retention.ms": "-1"}
        for i in range(200):
            await orders.send(key=str(i), value=Order(i, f"user-{i % 7}"), timestamp=1_600_000_000 + i)
        await wait_for(lambda: len(seen) == 200, 10, message="200 re-keyed records processed")
        ends = {TP(repartition, p): len(broker.logs[repartition][p]) for p in range(2)}
        assert sum(ends.values()) == 200
        await wait_for(lambda: {tp: broker.log_start.get(tp, 0) for tp in ends} == ends, 10,
                       message="the repartition topic purged up to what was processed")
        purged = dict(app.runtime.purge.purged)
    assert purged == ends
    assert TP("orders", 0) not in broker.log_start and TP("orders", 1) not in broker.log_start  # inputs are the user's


async def test_purging_waits_for_the_commit_the_broker_holds():
    app = make_app(repartition_purge_interval=3600)  # purged by hand below
    orders, seen, repartition = build(app)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    async with app.running():
        purge = app.runtime.purge
        assert await purge.purge_once() == {}  # nothing committed yet: nothing deleted
        for i in range(50):
            await orders.send(key=str(i), value=Order(i, f"user-{i % 5}"))
        await wait_for(lambda: len(seen) == 50, 10, message="50 processed")
        def committed():
            return {tp: offset for tp, offset in broker.committed.get(app.id, {}).items() if tp.topic == repartition}

        await wait_for(lambda: sum(committed().values()) == 50, 10, message="the repartition offsets committed")
        before = committed()
        assert await purge.purge_once() == before
        assert await purge.purge_once() == {}  # no commit moved: nothing asked again
    assert {tp: broker.log_start[tp] for tp in before} == before


async def test_a_purge_interval_of_zero_purges_nothing():
    app = make_app(repartition_purge_interval=0)
    orders, seen, repartition = build(app)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    async with app.running():
        for i in range(20):
            await orders.send(key=str(i), value=Order(i, f"user-{i % 3}"))
        await wait_for(lambda: len(seen) == 20, 10, message="20 processed")
        assert app.runtime.purge._task is None
    assert not any(tp.topic == repartition for tp in broker.log_start)


async def test_a_broker_that_refuses_deletes_is_told_once_and_purged_once_it_accepts(caplog):
    app = make_app(repartition_purge_interval=0.05)
    orders, seen, repartition = build(app)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.faults.refuse_delete_records = True
    async with app.running():
        for i in range(30):
            await orders.send(key=str(i), value=Order(i, f"user-{i % 3}"))
        await wait_for(lambda: len(seen) == 30, 10, message="30 processed")
        purge = app.runtime.purge
        await wait_for(lambda: purge.refusals >= 3, 10, message="three refused purges")
        assert purge.purged == {} and not any(tp.topic == repartition for tp in broker.log_start)
        warnings = [r for r in caplog.records if r.name == "streamkit.purge" and r.levelname == "WARNING"]
        assert len(warnings) == 1 and "did not delete" in warnings[0].getMessage()
        broker.faults.refuse_delete_records = False
        await wait_for(lambda: sum(broker.log_start.get(TP(repartition, p), 0) for p in range(2)) == 30, 10,
                       message="purged once the broker accepts")


async def test_a_repartition_topic_an_older_version_created_with_time_retention_is_named_at_start(caplog):
    app = make_app()
    orders, seen, repartition = build(app)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    broker.create_topic(repartition, 2)
    broker.topic_configs[repartition] = {"retention.ms": "604800000"}  # as created before 2026-11-26
    async with app.running():
        await orders.send(key="1", value=Order(1, "user-1"))
        await wait_for(lambda: seen == [1], 10, message="the record processed")
    drift = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and repartition in r.getMessage()]
    assert len(drift) == 1, drift
    assert "retention.ms=604800000" in drift[0]
    assert f"--entity-name {repartition} --add-config retention.ms=-1" in drift[0]


async def test_a_repartition_topic_with_the_right_config_gets_no_warning(caplog):
    app = make_app()
    orders, seen, repartition = build(app)
    async with app.running():
        await orders.send(key="1", value=Order(1, "user-1"))
        await wait_for(lambda: seen == [1], 10, message="the record processed")
    async with app.running():  # the second start finds the topic existing, as created
        pass
    assert not [r for r in caplog.records if r.levelname == "WARNING" and repartition in r.getMessage()]
