"""A shop's joins, one of each kind (docs/joins.md explains them line by line).

    python shop_joins.py feed     # send customers, prices, orders and payments
    streamkit worker -A shop_joins:app

- ``enrich``: each order (keyed by order id) with its customer's current record, through a
  repartition by customer (stream-table join, left);
- ``price``: each order with the item's price *valid at the order's time* (as-of join on a
  table that keeps an hour of history);
- ``profiles``: customers joined with their loyalty tier, a table kept up to date as either
  changes (table-table join, left);
- ``settle``: orders matched with payments of the same order id at most 10 minutes later; an
  order still unpaid when its window closes goes to ``unpaid`` (windowed stream-stream join, left).

``tests/unit/joins/test_joins_guide.py`` runs it and checks every output, and checks that each Python
block of docs/joins.md is taken from this file.
"""
import asyncio
import os
import sys
import time
from datetime import timedelta

import streamkit as sk

app = sk.App("shop-joins", broker=os.environ.get("STREAMKIT_BROKER", "127.0.0.1:9092"),
             session_timeout_ms=6000, heartbeat_interval_ms=1000)


class Customer(sk.Record):
    name: str


class Order(sk.Record):
    id: str
    customer: str
    item: str
    quantity: int


customers_topic = app.topic("customers", key_type=str, value_type=Customer)
orders = app.topic("orders", key_type=str, value_type=Order)              # keyed by order id
enriched = app.topic("orders-enriched", key_type=str)
customers = app.Table("customers", value_type=Customer)


@app.agent(customers_topic)
async def load_customers(stream):
    async for customer_id, customer in stream.items():
        customers[customer_id] = customer


@app.agent(orders)
async def enrich(stream):
    async for order, customer in stream.join(customers, on=Order.customer, how="left"):
        name = customer.name if customer else None
        await enriched.send(key=order.id, value={"order": order.id, "customer": name})


price_changes = app.topic("price-changes", key_type=str, value_type=float)  # item -> price
priced = app.topic("orders-priced", key_type=str)
prices = app.Table("prices", history=timedelta(hours=1))


@app.agent(price_changes)
async def load_prices(stream):
    async for item, price in stream.items():
        prices[item] = price


@app.agent(orders)
async def price(stream):
    async for order, unit_price in stream.join(prices, on=Order.item, as_of=True):
        await priced.send(key=order.id, value={"order": order.id, "total": order.quantity * unit_price})


tiers_topic = app.topic("loyalty-tiers", key_type=str, value_type=str)  # customer id -> tier
tiers = app.Table("loyalty-tiers")
profiles = customers.join(tiers, how="left", name="profiles")


@app.agent(tiers_topic)
async def load_tiers(stream):
    async for customer_id, tier in stream.items():
        tiers[customer_id] = tier


payments = app.topic("payments", key_type=str)  # keyed by the order id they pay
unpaid = app.topic("orders-unpaid", key_type=str)
paid = app.topic("orders-paid", key_type=str)


@app.agent(orders.join(payments, before=0, after=timedelta(minutes=10), how="left"))
async def settle(pairs):
    async for order_id, (order, payment) in pairs.items():
        if payment is None:
            await unpaid.send(key=order_id, value=order.id)
        else:
            await paid.send(key=order_id, value=payment)


# four hours ago, on the hour: record times inside any broker's time retention (a fixed date
# would get the inputs deleted by Kafka's 7-day retention), and Kafka refuses times over an hour ahead
START = (int(time.time()) // 3600 - 4) * 3600


async def feed(tables_loaded=None) -> None:
    """Two customers (one with a tier), apple's price changing at minute 5, four orders at
    minutes 1, 4, 6 and 8 (o4 from a customer the table lacks), o1 and o2 paid within 10
    minutes, o3 paid 12 minutes late, o4 never; then one payment per order an hour later
    moves each partition's stream time past every window. A running worker loads the tables
    before the orders arrive (``tables_loaded``: a second's pause, or a test driver's settle)."""
    await customers_topic.send(key="c1", value=Customer(name="Ann"), timestamp=START)
    await customers_topic.send(key="c2", value=Customer(name="Bob"), timestamp=START)
    await tiers_topic.send(key="c1", value="gold", timestamp=START)
    await price_changes.send(key="apple", value=2.0, timestamp=START)
    await price_changes.send(key="apple", value=3.0, timestamp=START + 300)
    await app.flush()
    await (tables_loaded() if tables_loaded else asyncio.sleep(1.0))
    for n, (minute, customer) in enumerate([(1, "c1"), (4, "c2"), (6, "c1"), (8, "c9")], start=1):
        await orders.send(key=f"o{n}", value=Order(id=f"o{n}", customer=customer, item="apple", quantity=n),
                          timestamp=START + 60 * minute)
    for order_id, minute in [("o1", 2), ("o2", 10), ("o3", 18)]:
        await payments.send(key=order_id, value=f"pay-{order_id}", timestamp=START + 60 * minute)
    for n in range(1, 5):
        await payments.send(key=f"o{n}", value="closing", timestamp=START + 3600)
    await app.flush()


async def _feed_and_stop() -> None:
    await feed()
    await app.stop()


if __name__ == "__main__" and sys.argv[1:] == ["feed"]:
    asyncio.run(_feed_and_stop())
