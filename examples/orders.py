"""Orders: re-key by user with group_by, keep per-user totals, answer questions with agent.ask.

    streamkit worker -A orders:app
    streamkit send -A orders:app orders --key o1 --value '{"id": "o1", "user": "alice", "amount": 9.5}'

From code running in a worker (a timer, a web view, another agent):
    total = await user_total.ask("alice")
"""
import os

import streamkit as sk

app = sk.App("orders", broker=os.environ.get("STREAMKIT_BROKER", "127.0.0.1:9092"),
             session_timeout_ms=6000, heartbeat_interval_ms=1000)


class Order(sk.Record):
    id: str
    user: str
    amount: float


orders = app.topic("orders", key_type=str, value_type=Order, partitions=4)
totals: dict[str, float] = {}  # per-user totals; app.Table replaces this in the tables issue


@app.agent(orders)
async def aggregate(stream):
    """Sum order amounts per user (repartitioned by user)."""
    async for order in stream.group_by(Order.user):
        totals[order.user] = totals.get(order.user, 0.0) + order.amount


@app.agent()
async def user_total(stream):
    """Reply with a user's total so far."""
    async for user in stream:
        yield totals.get(user, 0.0)
