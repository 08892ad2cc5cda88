"""The join chaos run's worker: orders (keyed by order id) enriched with their customer from a
table (a repartition by customer), and a windowed stream-stream join of lefts with rights.

JOIN_APP_ID, JOIN_TOPIC_SUFFIX, JOIN_HOW and CHAOS_GUARANTEE configure it (tests/chaos/joins.py sets
them); the driver and broker come from STREAMKIT_DRIVER and STREAMKIT_BROKER.
"""
import os

import streamkit as sk

suffix = os.environ.get("JOIN_TOPIC_SUFFIX", "x")
app = sk.App(os.environ.get("JOIN_APP_ID", "chaos-joins"),
             processing_guarantee=os.environ.get("CHAOS_GUARANTEE", "exactly_once"),
             commit_interval=0.5, transaction_timeout_ms=15000, session_timeout_ms=6000, heartbeat_interval_ms=1000,
             web_enabled=False)
customers_topic = app.topic(f"customers-{suffix}", key_type=str)
orders = app.topic(f"orders-{suffix}", key_type=str)
lefts, rights = app.topic(f"lefts-{suffix}", key_type=str), app.topic(f"rights-{suffix}", key_type=str)
enriched, matched = app.topic(f"enriched-{suffix}", key_type=str), app.topic(f"matched-{suffix}", key_type=str)
customers = app.Table("customers")


def customer_of(order):
    return order["customer"]


@app.agent(customers_topic)
async def load_customers(stream):
    async for key, customer in stream.items():
        customers[key] = customer


@app.agent(orders)
async def enrich(stream):
    async for order, customer in stream.join(customers, on=customer_of, how="left"):
        await enriched.send_soon(key=str(order["id"]), value={"id": order["id"], "name": customer and customer["name"]})


@app.agent(lefts.join(rights, within=1.5, grace=3600, how=os.environ.get("JOIN_HOW", "inner")), sink=[matched])
async def match(pairs):
    async for key, (left, right) in pairs.items():  # the sink's key is the current event's
        yield [key, left and left["id"], right and right["id"]]
