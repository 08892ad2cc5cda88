"""Page views per minute: a tumbling window, its final counts to a topic once each minute closes.

    streamkit worker -A pageviews:app          # run the worker (in this directory)
    python pageviews.py feed 600               # send 600 views spread over 10 minutes of event time
    python pageviews.py show --expect 10       # print the final per-minute counts (10 minutes)

Each view counts in the minute its event time falls in (the record's timestamp). A minute closes
when a view at least 10 s (the grace) past its end has been seen on that partition; then its
count goes to ``pageviews-per-minute`` once, as ``{"start": s, "end": e, "value": n}`` keyed by
the page, and a late view for it is counted in /metrics and dropped.
"""
import asyncio
import os
import sys
import time

import orjson

import streamkit as sk

app = sk.App("pageviews", broker=os.environ.get("STREAMKIT_BROKER", "127.0.0.1:9092"),
             session_timeout_ms=6000, heartbeat_interval_ms=1000)
views = app.topic("pageviews", key_type=str, value_type=str, partitions=4)
per_minute = app.topic("pageviews-per-minute", key_type=str, partitions=4)
counts = app.Table("views-per-minute", default=int).tumbling(60, grace=10).final(per_minute)

# four hours ago, on the hour: record times inside any broker's time retention (a fixed date
# would get the inputs deleted by Kafka's 7-day retention), and Kafka refuses times over an hour ahead
START = (int(time.time()) // 3600 - 4) * 3600


@app.agent(views)
async def count(stream):
    """Count each view in its page's current minute."""
    async for event in stream.events():
        counts[event.key] += 1


async def feed(n: int) -> None:
    """``n`` views of 3 pages, one per second of event time, then one per page 70 s later, which
    closes the last minute."""
    for i in range(n):
        await views.send(key=f"/page/{i % 3}", value="view", timestamp=START + i)
    for page in range(3):
        await views.send(key=f"/page/{page}", value="view", timestamp=START + n + 70)
    await app.flush()


def final_counts(records: list) -> list[tuple[str, float, int]]:
    """(page, minute start, views) of each emitted window, from (key bytes, value bytes)."""
    return sorted((key.decode(), orjson.loads(value)["start"], orjson.loads(value)["value"])
                  for key, value in records)


def show(expect: int) -> None:
    from streamkit.testing import read_topic

    records = read_topic(app.conf, per_minute.name, expect=expect * 3, timeout=60)
    rows = final_counts([(m.key(), m.value()) for m in records])
    for page, start, n in rows:
        print(page, start, n)
    if len(rows) != expect * 3:
        sys.exit(1)


async def _feed_and_stop(n: int) -> None:
    await feed(n)
    await app.stop()


if __name__ == "__main__":
    if sys.argv[1] == "feed":
        asyncio.run(_feed_and_stop(int(sys.argv[2])))
    elif sys.argv[1] == "show":
        show(int(sys.argv[-1]))
