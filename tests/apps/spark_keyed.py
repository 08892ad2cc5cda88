"""The agent every Faust pipeline has, written as Faust users write it: payments re-keyed by user,
summed in a table. tests/spark/test_cluster.py runs it on a Spark cluster, then a worker continues
from the totals Spark left in the table's changelog. KEYED_APP names the app and its topic."""
import os

import streamkit as faust

NAME = os.environ.get("KEYED_APP", "keyed")
app = faust.App(NAME, topic_partitions=4, session_timeout_ms=6000, heartbeat_interval_ms=1000, web_enabled=False)


class Pay(faust.Record):
    id: str
    user: str
    amount: float


payments = app.topic(f"{NAME}-payments", key_type=str, value_type=Pay)  # keyed by payment id
totals = app.Table("totals", default=float)


@app.agent(payments)
async def total_by_user(stream):
    async for p in stream.group_by(Pay.user):
        totals[p.user] += p.amount
