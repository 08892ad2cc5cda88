# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Joins as users write them (defaults as they are: no partitions=, default commit interval),
run as deployed on the test driver: stream-table (by key, on= a field with a repartition, as of
the record's time), stream-GlobalTable, table-table, windowed stream-stream; co-partitioning
errors at start; what the topology shows; Spark's refusal."""
from __future__ import annotations

from datetime import timedelta

import pytest

import streamkit as faust
from streamkit.errors import ConfigurationError, SparkUnsupported
from streamkit.testing.driver import TestDriver
from streamkit.transport.memory import MemoryConsumer


class Customer(faust.Record):
    name: str


class Order(faust.Record):
    id: str
    customer: str
    amount: int


def shop(app_id: str, *, global_customers: bool = False):
    app = faust.App(app_id)
    customers_topic = app.topic("customers", key_type=str, value_type=Customer)
    orders_topic = app.topic("orders", key_type=str, value_type=Order)  # keyed by order id
    enriched = app.topic("enriched")
    make = app.GlobalTable if global_customers else app.Table
    customers = make("customers", value_type=Customer)

    @app.agent(customers_topic)
    async def load_customers(stream):
        async for key, customer in stream.items():
            customers[key] = customer

    @app.agent(orders_topic)
    async def enrich(orders):
        async for order, customer in orders.join(customers, on=Order.customer, how="left"):
            await enriched.send(key=order.id, value={"order": order.id, "name": customer and customer.name})

    return app, customers_topic, orders_topic, enriched


async def test_orders_keyed_by_their_id_are_repartitioned_by_customer_to_meet_the_customer_table():
    app, customers_topic, orders_topic, enriched = shop("join-shop")
    async with TestDriver(app) as driver:
        for cid, name in [("c1", "Ann"), ("c2", "Bob"), ("c3", "Cy")]:
            await driver.send(customers_topic, key=cid, value=Customer(name=name))
        await driver.settle()
        for n in range(12):
            await driver.send(orders_topic, key=f"o{n}", value=Order(id=f"o{n}", customer=f"c{n % 4}", amount=n))
        await driver.settle()
        got = {r.value["order"]: r.value["name"] for r in driver.records(enriched)}
        assert got == {f"o{n}": {0: None, 1: "Ann", 2: "Bob", 3: "Cy"}[n % 4] for n in range(12)}
        repartition = [t for t in app.runtime.topology.subscribed if t.endswith("-repartition")]
        assert repartition == ["join-shop-enrich-customers-join-customer-repartition"]
        description = app.runtime.topology.describe()
        assert f"join {repartition[0]} with table customers (left)" in description
        assert "co-partitioned (8 partitions): customers, " + repartition[0] in description


async def test_a_global_table_is_joined_on_any_key_without_a_repartition():
    app, customers_topic, orders_topic, enriched = shop("join-shop-global", global_customers=True)
    async with TestDriver(app) as driver:
        await driver.send(customers_topic, key="c1", value=Customer(name="Ann"))
        await driver.settle()
        await driver.send(orders_topic, key="o1", value=Order(id="o1", customer="c1", amount=5))
        await driver.send(orders_topic, key="o2", value=Order(id="o2", customer="c9", amount=5))
        await driver.settle()
        assert sorted((r.value["order"], r.value["name"]) for r in driver.records(enriched)) == [
            ("o1", "Ann"), ("o2", None)]
        assert not [t for t in app.runtime.topology.subscribed if t.endswith("-repartition")]


async def test_an_inner_join_skips_records_without_a_table_value_and_counts_them_processed():
    app = faust.App("join-inner")
    prices_topic, clicks = app.topic("prices"), app.topic("clicks")
    out = app.topic("priced")
    prices = app.Table("prices")

    @app.agent(prices_topic)
    async def load(stream):
        async for key, price in stream.items():
            prices[key] = price

    @app.agent(clicks)
    async def price(stream):
        async for click, amount in stream.join(prices):
            await out.send(value=[click, amount])

    async with TestDriver(app) as driver:
        await driver.send(prices_topic, key="apple", value=3)
        await driver.settle()
        for item in ("apple", "pear", "apple"):
            await driver.send(clicks, key=item, value=item)
        await driver.settle()  # fails unless every click, joined or skipped, counts as processed
        assert sorted(r.value for r in driver.records(out)) == [["apple", 3], ["apple", 3]]


async def test_an_as_of_join_reads_the_value_valid_at_each_records_time():
    app = faust.App("join-asof")
    rates_topic, trades = app.topic("rates"), app.topic("trades")
    out = app.topic("valued")
    rates = app.Table("rates", history=timedelta(hours=1))

    @app.agent(rates_topic)
    async def load(stream):
        async for key, rate in stream.items():
            rates[key] = rate

    @app.agent(trades)
    async def value(stream):
        async for trade, rate in stream.join(rates, as_of=True, how="left"):
            await out.send(value=[trade, rate])

    async with TestDriver(app) as driver:
        for at, rate in [(1000, 1.0), (1060, 1.5), (1120, 2.0)]:
            await driver.send(rates_topic, key="EUR", value=rate, timestamp=at)
        await driver.settle()
        for at in (990, 1000, 1059, 1061, 1500):  # trades processed after every rate: as of their own time
            await driver.send(trades, key="EUR", value=at, timestamp=at)
        await driver.settle()
        assert sorted(r.value for r in driver.records(out)) == [
            [990, None], [1000, 1.0], [1059, 1.0], [1061, 1.5], [1500, 2.0]]
        assert driver.table("rates")["EUR"] == 2.0
        assert driver.table("rates").as_of("EUR", 1070) == 1.5


async def test_a_table_table_join_follows_both_sides_and_writes_its_own_changelog():
    app = faust.App("join-tables")
    names_topic, emails_topic = app.topic("names"), app.topic("emails")
    names, emails = app.Table("names"), app.Table("emails")
    contacts = names.join(emails, how="outer")

    @app.agent(names_topic)
    async def load_names(stream):
        async for key, name in stream.items():
            if name is None:
                del names[key]
            else:
                names[key] = name

    @app.agent(emails_topic)
    async def load_emails(stream):
        async for key, email in stream.items():
            emails[key] = email

    async with TestDriver(app) as driver:
        await driver.send(names_topic, key="u1", value="Ann")
        await driver.send(emails_topic, key="u1", value="ann@x")
        await driver.send(emails_topic, key="u2", value="bob@x")
        await driver.settle()
        assert dict(contacts.items()) == {"u1": ("Ann", "ann@x"), "u2": (None, "bob@x")}
        await driver.send(names_topic, key="u1", value=None)
        await driver.settle()
        assert contacts["u1"] == (None, "ann@x")
        changelog = driver.records(contacts.changelog.name)
        assert [(r.key, r.value) for r in changelog if r.key == b"u1"] == [
            (b"u1", b'{"__sk__":"tuple","v":["Ann","ann@x"]}'), (b"u1", b'{"__sk__":"tuple","v":[null,"ann@x"]}')]
        with pytest.raises(TypeError, match="written by its sides"):
            contacts["u3"] = ("x", "y")


async def test_a_windowed_join_pairs_records_within_the_window_and_a_left_join_waits_for_it_to_close():
    app = faust.App("join-window")
    orders, payments = app.topic("orders", value_type=Order), app.topic("payments")
    out = app.topic("matched")

    @app.agent(orders.join(payments, within=timedelta(seconds=10), how="left"))
    async def match(pairs):
        async for order, payment in pairs:
            await out.send(key=order.id, value=[order.id, payment])

    async with TestDriver(app) as driver:
        await driver.send(orders, key="c1", value=Order(id="o1", customer="c1", amount=1), timestamp=1000)
        await driver.send(orders, key="c1", value=Order(id="o2", customer="c1", amount=1), timestamp=1001)
        await driver.send(payments, key="c1", value="pay-1", timestamp=1005)
        await driver.settle()
        assert sorted(r.value for r in driver.records(out)) == [["o1", "pay-1"], ["o2", "pay-1"]]
        await driver.send(orders, key="c1", value=Order(id="o3", customer="c1", amount=1), timestamp=1020)
        await driver.settle()
        assert len(driver.records(out)) == 2  # o3's window is open: no early (o3, None)
        await driver.send(payments, key="c1", value="pay-late-for-o3", timestamp=1031)  # past o3's 1030 end
        await driver.settle()
        assert sorted(r.value for r in driver.records(out)) == [["o1", "pay-1"], ["o2", "pay-1"], ["o3", None]]
        assert "join orders with payments (left, within 10s, grace 0s)" in app.runtime.topology.describe()


async def test_joined_topics_with_different_partition_counts_are_a_startup_error_naming_the_fix():
    app = faust.App("join-mismatch")
    orders, payments = app.topic("orders", partitions=4), app.topic("payments", partitions=2)

    @app.agent(orders.join(payments, within=5))
    async def match(pairs):
        async for _ in pairs:
            pass

    with pytest.raises(ConfigurationError) as failure:
        async with TestDriver(app):
            pass
    message = str(failure.value)
    assert "'orders' has 4, 'payments' has 2" in message and "repartition one side to 4 partitions" in message


async def test_a_table_declaring_another_partition_count_than_its_joined_stream_is_a_startup_error():
    app = faust.App("join-table-mismatch")
    clicks = app.topic("clicks", partitions=4)
    prices = app.Table("prices", partitions=2)

    @app.agent(clicks)
    async def price(stream):
        async for _ in stream.join(prices):
            pass

    with pytest.raises(ConfigurationError, match="table 'prices' declares 2 partitions but clicks has 4"):
        async with TestDriver(app):
            pass


def test_join_options_that_make_no_sense_are_refused_with_the_way():
    app = faust.App("join-refusals")
    a, b = app.topic("a"), app.topic("b")
    table = app.Table("t")
    with pytest.raises(ConfigurationError, match="within="):
        a.join(b)
    with pytest.raises(ConfigurationError, match="inner', 'left' or 'outer'"):
        a.join(b, within=1, how="right")
    with pytest.raises(TypeError, match="stream-table join runs in the agent"):
        a.join(table)
    with pytest.raises(ConfigurationError, match="history="):
        from streamkit.joins.lookup import stream_table_join

        stream_table_join(object(), table, on=None, how="left", as_of=True)
    with pytest.raises(ConfigurationError, match="plain tables"):
        table.join(app.GlobalTable("g"))
    with pytest.raises(ConfigurationError, match="concurrency=2 is refused: a windowed join reads"):
        app.agent(a.join(b, within=1), concurrency=2)(lambda pairs: pairs)


def test_spark_runs_a_windowed_join_and_refuses_what_it_cannot_with_the_reason():
    from streamkit.errors import ConfigurationError
    from streamkit.spark.checks import check_runnable, is_keyed
    from streamkit.spark.keyed import plan

    app = faust.App("join-spark")
    a, b, out = app.topic("a"), app.topic("b"), app.topic("out")

    @app.agent(a.join(b, within=5), sink=[out])
    async def pairs(stream):
        async for pair in stream:
            yield pair

    check_runnable(pairs)  # runs per partition (spark/partitioned.py), the buffer its state
    assert is_keyed(pairs) and [t.name for t in plan(pairs).tables] == ["a-b-join"]

    @app.agent(a.join(b, within=5, name="regrouped"), sink=[out])
    async def regrouped(stream):
        async for left, _right in stream.group_by(lambda pair: pair[0]):
            yield left

    with pytest.raises(ConfigurationError, match="re-keys a windowed join's pairs"):
        plan(regrouped)

    @app.agent(a.join(b, within=5, name="effects"))
    async def effects(stream):
        async for pair in stream:
            print(pair)

    with pytest.raises(SparkUnsupported, match="keeps no table"):
        check_runnable(effects)


async def test_faust_field_list_joins_are_refused_with_the_streamkit_way():
    app = faust.App("join-faust-names")
    orders_topic = app.topic("orders", value_type=Order)
    customers = app.Table("customers")
    errors = []

    @app.agent(orders_topic)
    async def enrich(stream):
        for attempt in (lambda: stream.left_join(Order.customer), lambda: stream.outer_join(Order.customer),
                        lambda: stream.join(Order.customer)):
            try:
                attempt()
            except TypeError as exc:
                errors.append(str(exc))
        async for _ in stream.join(customers):
            pass

    async with TestDriver(app) as driver:
        await driver.settle()
    assert len(errors) == 3, errors
    assert "stream.join(table, on=field, how='left')" in errors[0]
    assert "table.join(other, how='outer')" in errors[1]
    assert "takes a Table or GlobalTable" in errors[2] and "docs/joins.md" in errors[2]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_repartition_keeps_each_records_time_for_the_as_of_join(guarantee):
    app = faust.App(f"join-asof-repartition-{guarantee}", processing_guarantee=guarantee)
    rates_topic, trades = app.topic("rates", key_type=str), app.topic("trades", key_type=str)
    out = app.topic("valued")
    rates = app.Table("rates", history=timedelta(hours=1))

    @app.agent(rates_topic)
    async def load(stream):
        async for currency, rate in stream.items():
            rates[currency] = rate

    @app.agent(trades)
    async def value(stream):  # trades keyed by trade id: repartitioned by currency, each at its own time
        async for trade, rate in stream.join(rates, on=lambda trade: trade["currency"], how="left", as_of=True):
            await out.send(value=[trade["id"], rate])

    async with TestDriver(app) as driver:
        for at, rate in [(1000, 1.0), (1060, 1.5)]:
            await driver.send(rates_topic, key="EUR", value=rate, timestamp=at)
        await driver.settle()
        for n, at in enumerate((990, 1030, 1070)):
            await driver.send(trades, key=f"t{n}", value={"id": n, "currency": "EUR"}, timestamp=at)
        await driver.settle()
        assert sorted(r.value for r in driver.records(out)) == [[0, None], [1, 1.0], [2, 1.5]]


@pytest.mark.parametrize("count", [400, 6_000])  # 12,000: more than a partition may hold unpaused
async def test_a_windowed_join_catching_up_on_two_filled_topics_reads_them_in_time_order(count):
    """All the lefts were written before all the rights (a restart after downtime, a reprocessing):
    read batch by batch, the lefts would move the stream time past every right, dropped as late.
    Each partition's two sides are read in timestamp order instead, so nothing is late."""
    app = faust.App("join-catch-up")
    lefts, rights = app.topic("lefts", key_type=str), app.topic("rights", key_type=str)
    out = app.topic("pairs")
    join = lefts.join(rights, within=timedelta(seconds=1))  # grace 0: Kafka Streams' default

    @app.agent(join)
    async def pair_up(pairs):
        async for left, right in pairs:
            await out.send(value=[left, right])

    start_ms = 1_767_225_600_000
    driver = TestDriver(app)
    broker = driver.broker  # filled before the worker starts: it catches up on both topics
    for name in ("lefts", "rights"):
        broker.create_topic(name, app.conf.topic_partitions)
    for name, shift in (("lefts", 0), ("rights", 50)):
        for i in range(count):
            broker.append(name, f"k{i % 7}".encode(), str(i).encode(), None, None, start_ms + i * 100 + shift)
    truth = sorted([i, j] for i in range(count) for j in range(i % 7, count, 7)
                   if abs((j * 100 + 50) - i * 100) <= 1000)  # j within 1 s of i: before the app runs
    async with driver:
        await driver.settle()
        assert join.late_records == 0
        assert sorted(r.value for r in driver.records(out)) == truth


async def test_a_catch_up_larger_than_the_join_may_hold_pauses_the_side_ahead_instead_of_dropping(monkeypatch):
    """One side delivered far ahead of the other (a client that fetches one topic first) must not
    push the stream time past the other side: the join pauses the partition that is ahead once it
    holds PAUSE_AT records, and reads on when they are out, rather than handing them out unpaired
    once MAX_BUFFERED is reached. Limits made small so 12,000 records per side (more than one fetch) exceed them."""
    from streamkit.joins import aligned
    monkeypatch.setattr(aligned, "PAUSE_AT", 40)
    monkeypatch.setattr(aligned, "HOLD_CAP", 400)
    collect = MemoryConsumer._collect

    def lefts_first(consumer, max_records):  # a client that drains one topic's fetches first
        consumer._positions = dict(sorted(consumer._positions.items(), key=lambda item: item[0].topic != "lefts"))
        return collect(consumer, max_records)

    monkeypatch.setattr(MemoryConsumer, "_collect", lefts_first)
    app = faust.App("join-catch-up-paused")
    lefts, rights = app.topic("lefts", key_type=str), app.topic("rights", key_type=str)
    out = app.topic("pairs")
    join = lefts.join(rights, within=timedelta(seconds=1))

    @app.agent(join)
    async def pair_up(pairs):
        async for left, right in pairs:
            await out.send(value=[left, right])

    count, start_ms = 12_000, 1_767_225_600_000
    driver = TestDriver(app)
    broker = driver.broker
    for name in ("lefts", "rights"):
        broker.create_topic(name, app.conf.topic_partitions)
    for name, shift in (("lefts", 0), ("rights", 50)):
        for i in range(count):
            broker.append(name, f"k{i % 7}".encode(), str(i).encode(), None, None, start_ms + i * 100 + shift)
    truth = sorted([i, j] for i in range(count) for j in range(i % 7, count, 7) if abs((j * 100 + 50) - i * 100) <= 1000)
    async with driver:
        await driver.settle()
        assert join.late_records == 0
        assert join.alignment.unaligned == 0, join.alignment
        assert join.alignment.pauses > 0  # it did have to pause: the limits were reached
        assert sorted(r.value for r in driver.records(out)) == truth
