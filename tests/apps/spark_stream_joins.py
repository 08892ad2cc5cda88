"""A windowed stream-stream join for the Spark tests, written once and built twice (one app run
by Spark, one by the worker) so their outputs and join buffers can be compared: orders joined
with their payments within 5 s (outer: an order nobody paid and a payment of no order come out
alone once their window closed), pairs counted per order in a plain table; and each order priced
by a GlobalTable of rates per currency (loaded from a topic both apps share); and a table-table
join of customers' tiers with their cities, each side written by its own agent.

SPARK_JOINS_BROKER and SPARK_JOINS_RUN (a suffix for every topic) configure it.
"""
import os

import streamkit as sk

RUN = os.environ.get("SPARK_JOINS_RUN", "local")
BROKER = os.environ.get("SPARK_JOINS_BROKER", "127.0.0.1:9092")
PARTITIONS = 3


class Order(sk.Record):
    id: str
    amount: int
    currency: str = "eur"


class Payment(sk.Record):
    id: str
    order: str


class Profile(sk.Record):
    customer: str
    tier: str  # "gone": the customer is deleted


class Move(sk.Record):
    customer: str
    city: str


def build(role: str) -> sk.App:
    app = sk.App(f"joins-{role}-{RUN}", broker=f"kafka://{BROKER}", driver="confluent", commit_interval=0.5,
                 session_timeout_ms=6000, heartbeat_interval_ms=1000, topic_partitions=PARTITIONS,
                 web_enabled=False)
    orders = app.topic(f"orders-{RUN}", key_type=str, value_type=Order, partitions=PARTITIONS)
    payments = app.topic(f"payments-{RUN}", key_type=str, value_type=Payment, partitions=PARTITIONS)
    app.paired = app.topic(f"paired-{role}-{RUN}", key_type=str, partitions=PARTITIONS)
    matched = app.Table("matched", default=int)
    app.priced = app.topic(f"priced-{role}-{RUN}", key_type=str, partitions=PARTITIONS)
    rates = app.GlobalTable("rates", key_type=str, value_type=float,
                            changelog_topic=app.topic(f"rates-{RUN}", key_type=str, value_type=float,
                                                      partitions=PARTITIONS))

    # grace 60 s: how the worker's first fetches of the two topics interleave (a few seconds at
    # most) changes no output, so the comparison is exact; records 90 s out of order are late
    @app.agent(orders.join(payments, within=5, grace=60, how="outer"), sink=[app.paired])
    async def pair(stream):
        """Each order with each payment of it 5 s apart or less; alone when none came."""
        async for key, (order, payment) in stream.items():
            if order is not None and payment is not None:
                matched[key] += 1
            yield {"order": order.id if order else None, "amount": order.amount if order else None,
                   "payment": payment.id if payment else None}

    profiles = app.topic(f"profiles-{RUN}", key_type=str, value_type=Profile, partitions=PARTITIONS)
    moves = app.topic(f"moves-{RUN}", key_type=str, value_type=Move, partitions=PARTITIONS)
    tiers = app.Table("tiers", key_type=str, value_type=str)
    cities = app.Table("cities", key_type=str, value_type=str)
    located = app.located = tiers.join(cities, how="left")

    @app.agent(profiles)
    async def profile(stream):
        async for p in stream:
            if p.tier == "gone":
                tiers.pop(p.customer, None)
            else:
                tiers[p.customer] = p.tier

    @app.agent(moves)
    async def move(stream):
        async for m in stream:
            cities[m.customer] = m.city

    asks = app.topic(f"asks-{RUN}", key_type=str, value_type=str, partitions=PARTITIONS)
    app.answers = app.topic(f"answers-{role}-{RUN}", key_type=str, partitions=PARTITIONS)

    @app.agent(asks, sink=[app.answers])
    async def where(stream):
        """Each customer asked about, with its tier and city: a read of the joined table."""
        async for customer in stream:
            yield {"customer": customer, "located": located.get(customer)}

    @app.agent(orders, sink=[app.priced])
    async def price(stream):
        """Each order's amount in the rates' unit (None: no rate for its currency)."""
        async for order, rate in stream.join(rates, on=Order.currency, how="left"):
            yield {"order": order.id, "value": None if rate is None else order.amount * rate}

    return app


spark_app = build("spark")
worker_app = build("worker")
