"""A Faust-style pipeline, written as Faust users write it, for Spark and the worker alike:
profiles kept in a table, payments summed per user after a group_by, counted per user in
tumbling minutes with each minute's final count sent to a topic, and enriched with the user's
profile by a stream-table join. PIPELINE_APP names the app and its topics."""
import os

import streamkit as faust

NAME = os.environ.get("PIPELINE_APP", "pipeline")
app = faust.App(NAME, topic_partitions=4, session_timeout_ms=6000, heartbeat_interval_ms=1000, web_enabled=False)


class User(faust.Record):
    id: str
    country: str


class Pay(faust.Record):
    id: str
    user: str
    amount: float


users = app.topic(f"{NAME}-users", key_type=str, value_type=User)  # keyed by user id
payments = app.topic(f"{NAME}-payments", key_type=str, value_type=Pay)  # keyed by payment id
minutes = app.topic(f"{NAME}-minutes", key_type=str)
enriched = app.topic(f"{NAME}-enriched", key_type=str)

profiles = app.Table("profiles", value_type=User)
totals = app.Table("totals", default=float)
per_minute = app.Table("per_minute", default=int).tumbling(60, grace=10).final(minutes)


@app.agent(users)
async def keep_profiles(stream):
    async for user in stream:
        profiles[user.id] = user


@app.agent(payments)
async def total_by_user(stream):
    async for p in stream.group_by(Pay.user):
        totals[p.user] += p.amount


@app.agent(payments)
async def count_per_minute(stream):
    async for _payment in stream:
        per_minute["payments"] += 1  # as Faust's windowing examples: a counter per partition


@app.agent(payments, sink=[enriched])
async def enrich(stream):
    async for p, user in stream.join(profiles, on=Pay.user, how="left"):
        yield {"id": p.id, "amount": p.amount, "country": user.country if user else None}
