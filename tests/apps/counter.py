"""A table-counting worker for process-level tests.

COUNTER_APP_ID, COUNTER_IN, COUNTER_PARTITIONS configure it; with COUNTER_HOLD=1 the agent
waits for POST /release before its first record, so a test can read the recovered state.
"""
import asyncio
import os

import streamkit as sk

app = sk.App(os.environ.get("COUNTER_APP_ID", "counter"), commit_interval=0.5,
             session_timeout_ms=6000, heartbeat_interval_ms=1000)
partitions = int(os.environ.get("COUNTER_PARTITIONS", "4"))
source = app.topic(os.environ.get("COUNTER_IN", "counter-in"), key_type=str, value_type=int, partitions=partitions)
counts = app.Table("counts", default=int)
released = asyncio.Event()


@app.agent(source)
async def count(stream):
    """Count records per key."""
    if os.environ.get("COUNTER_HOLD") == "1":
        await released.wait()
    async for event in stream.events():
        counts[event.key] += 1


@app.page("/dump")
async def dump(web, request):
    return web.json(dict(counts.items()))


@app.page("/release")
async def release(web, request):
    released.set()
    return web.json({"released": True})


@app.page("/count/{key}")
@app.table_route(table=counts, match_info="key")
async def one(web, request, key):
    return web.json({"key": key, "count": counts[key]})
