"""A windowed join's unpaired records come out under their own key, whichever record's time
closed their window: from ``.items()``, from ``yield`` to the agent's sinks, and as
``current_event()`` (its key, topic, offset and time). One partition, so records of different
keys share a stream time, as any busy partition does."""
from __future__ import annotations

import logging

import pytest

import streamkit as sk
from streamkit.testing.driver import TestDriver
from streamkit.testing.helpers import wait_for


def one_partition_join(app_id: str, how: str):
    app = sk.App(app_id, topic_partitions=1)
    orders, payments = app.topic("orders", key_type=str), app.topic("payments", key_type=str)
    via_items, via_yield = app.topic("via-items", key_type=str), app.topic("via-yield", key_type=str)
    seen: list[tuple] = []

    @app.agent(orders.join(payments, within=10, how=how))
    async def by_items(pairs):
        async for key, (order, payment) in pairs.items():
            event = sk.current_event()
            seen.append((key, order, payment, event.key, event.topic, event.offset, event.timestamp))
            await via_items.send(key=key, value=[order, payment])

    @app.agent(orders.join(payments, within=10, how=how, name="second"), sink=[via_yield])
    async def by_yield(pairs):
        async for order, payment in pairs:
            yield [order, payment]

    return app, orders, payments, via_items, via_yield, seen


async def _feed(driver, orders, payments) -> None:
    await driver.send(orders, key="o1", value="order-1", timestamp=1000)   # paid
    await driver.send(orders, key="o2", value="order-2", timestamp=1001)   # never paid
    await driver.send(payments, key="o1", value="pay-1", timestamp=1002)
    await driver.send(payments, key="p9", value="pay-9", timestamp=1003)   # pays nothing
    await driver.send(orders, key="o3", value="closer", timestamp=1100)    # closes every window above
    await driver.settle()


def _by_key(driver, topic) -> list[tuple]:
    return sorted((r.key, tuple(r.value)) for r in driver.records(topic))


async def test_a_left_joins_unpaired_record_keeps_its_own_key_in_items_yield_and_current_event():
    app, orders, payments, via_items, via_yield, seen = one_partition_join("join-own-key-left", "left")
    async with TestDriver(app) as driver:
        await _feed(driver, orders, payments)
        expected = [("o1", ("order-1", "pay-1")), ("o2", ("order-2", None))]
        assert _by_key(driver, via_items) == expected
        assert _by_key(driver, via_yield) == expected
        unpaired = [s for s in seen if s[2] is None]
        assert unpaired == [("o2", "order-2", None, "o2", "orders", 1, 1001 * 1000)]


async def test_an_outer_joins_unpaired_records_of_both_sides_keep_their_own_keys():
    app, orders, payments, via_items, via_yield, seen = one_partition_join("join-own-key-outer", "outer")
    async with TestDriver(app) as driver:
        await _feed(driver, orders, payments)
        expected = [("o1", ("order-1", "pay-1")), ("o2", ("order-2", None)), ("p9", (None, "pay-9"))]
        assert _by_key(driver, via_items) == expected
        assert _by_key(driver, via_yield) == expected
        alone = sorted((s[0], s[3], s[4], s[5]) for s in seen if s[1] is None or s[2] is None)
        assert alone == [("o2", "o2", "orders", 1), ("p9", "p9", "payments", 1)]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_close_idle_after_lets_an_idle_partitions_unpaired_records_go_under_their_own_keys(guarantee, caplog):
    app = sk.App(f"join-idle-{guarantee}", topic_partitions=1, processing_guarantee=guarantee)
    orders, payments = app.topic("orders", key_type=str), app.topic("payments", key_type=str)
    out = app.topic("settled", key_type=str)
    join = orders.join(payments, within=10, how="outer", close_idle_after=5)

    @app.agent(join, sink=[out])
    async def settle(pairs):
        async for order, payment in pairs:
            yield [order, payment]

    async with TestDriver(app) as driver:
        await driver.send(orders, key="o1", value="order-1", timestamp=1000)
        await driver.send(payments, key="p1", value="pay-1", timestamp=1001)
        await driver.send(orders, key="o2", value="order-2", timestamp=1001)
        await driver.send(payments, key="o2", value="pay-2", timestamp=1001)
        await driver.settle()
        assert _by_key(driver, out) == [("o2", ("order-2", "pay-2"))]  # o1 and p1 wait for their windows
        # idle 20 s, 15 past close_idle_after: stream time 1001 + 15 passes o1's 1010 and p1's 1011
        await driver.advance(20)
        await wait_for(lambda: len(driver.records(out)) == 3, 10, message="the idle partition's records out")
        assert _by_key(driver, out) == [("o1", ("order-1", None)), ("o2", ("order-2", "pay-2")),
                                        ("p1", (None, "pay-1"))]
        assert "closed after 5s idle" in app.runtime.topology.describe()
        with caplog.at_level(logging.WARNING, logger="streamkit.joins"):
            await driver.send(orders, key="o3", value="order-3", timestamp=1005)  # behind the moved stream time
            await driver.settle()
        assert join.late_records == 1 and len(driver.records(out)) == 3
        late = [r.getMessage() for r in caplog.records if "late record" in r.getMessage()]
        assert len(late) == 1 and "key 'o3': event time 1970-01-01T00:16:45.000Z" in late[0], late
        assert "stream time 1970-01-01T00:16:56.000Z (grace 0 s): 11 s late" in late[0], late


async def test_without_close_idle_after_an_idle_partitions_unpaired_records_wait_for_its_next_record():
    app, orders, payments, via_items, via_yield, seen = one_partition_join("join-not-idle", "left")
    async with TestDriver(app) as driver:
        await driver.send(orders, key="o1", value="order-1", timestamp=1000)
        await driver.settle()
        await driver.advance(60)
        await driver.settle()
        assert driver.records(via_items) == []
        await driver.send(payments, key="zz", value="pay", timestamp=1100)
        await wait_for(lambda: len(driver.records(via_items)) == 1, 10, message="o1 out once time moved")
        assert _by_key(driver, via_items) == [("o1", ("order-1", None))]


async def test_an_agent_failing_on_an_idle_partitions_unpaired_record_gets_it_again():
    app = sk.App("join-idle-retry", topic_partitions=1)
    orders, payments = app.topic("orders", key_type=str), app.topic("payments", key_type=str)
    out = app.topic("settled", key_type=str)
    failures: list[str] = []

    @app.agent(orders.join(payments, within=10, how="left", close_idle_after=5))
    async def settle(pairs):
        async for key, (order, payment) in pairs.items():
            if not failures:
                failures.append(key)
                raise RuntimeError("the first try fails")
            await out.send(key=sk.current_event().key, value=[order, payment])

    async with TestDriver(app) as driver:
        await driver.send(orders, key="o1", value="order-1", timestamp=1000)
        await driver.settle()
        await driver.advance(20)
        await wait_for(lambda: len(driver.records(out)) == 1, 10, message="o1 out after its retry")
        await driver.settle()
        assert failures == ["o1"] and _by_key(driver, out) == [("o1", ("order-1", None))]
