"""Windowed tables for the Spark tests, written once and built twice (one app run by Spark, one by
the worker) so their finals and changelogs can be compared: every window type in one agent over
clicks keyed by user, and a tumbling count after a group_by.

SPARK_WINDOWS_BROKER and SPARK_WINDOWS_RUN (a suffix for every topic) configure it.
"""
import os

import streamkit as sk

RUN = os.environ.get("SPARK_WINDOWS_RUN", "local")
BROKER = os.environ.get("SPARK_WINDOWS_BROKER", "127.0.0.1:9092")
PARTITIONS = 3


class Click(sk.Record):
    user: str
    page: str
    at: float  # epoch seconds: the hopping table's event time
    weight: int


def build(role: str) -> sk.App:
    app = sk.App(f"windows-{role}-{RUN}", broker=f"kafka://{BROKER}", driver="confluent", commit_interval=0.5,
                 session_timeout_ms=6000, heartbeat_interval_ms=1000, topic_partitions=PARTITIONS,
                 web_enabled=False)
    clicks = app.topic(f"clicks-{RUN}", key_type=str, value_type=Click, partitions=PARTITIONS)
    app.finals = {kind: app.topic(f"{kind}-{role}-{RUN}", key_type=str, partitions=PARTITIONS)
                  for kind in ("tumbling", "hopping", "sessions", "sliding", "pages")}
    tumbling = app.Table("tumbling", default=int).tumbling(10, grace=2, late="dead-letter").final(app.finals["tumbling"])
    hopping = (app.Table("hopping", default=int).hopping(10, 5, grace=3).relative_to_field(Click.at)
               .final(app.finals["hopping"]))
    sessions = app.Table("sessions", default=int).session(0.6, grace=1).final(app.finals["sessions"])
    sliding = app.Table("sliding", default=int).sliding(6, grace=2).final(app.finals["sliding"])

    @app.agent(clicks)
    async def count_clicks(stream):
        """Each click counted in four kinds of window of its user."""
        async for click in stream:
            tumbling[click.user] += 1
            hopping[click.user] += click.weight
            sessions[click.user] += 1
            sliding[click.user] += click.weight

    tally = app.Table("tally", default=int)

    @app.fold(clicks, table=tally)
    def count_weights(total, click):
        """A fold: each user's summed weights (a user's clicks sent to another partition than its
        key's are summed there, in that partition's task, as Faust and Kafka Streams keep them)."""
        return total + click.weight, []

    pages = app.Table("pages", default=int).tumbling(20, grace=600).final(app.finals["pages"])

    @app.agent(clicks)
    async def count_pages(stream):
        """Clicks per page and 20 s, re-keyed by page. The worker interleaves the clicks' partitions
        as it fetches them, Spark by timestamp: a grace longer than the input keeps every record in
        time for both (none closes: the test compares the open windows)."""
        async for click in stream.group_by(Click.page):
            pages[click.page] += 1

    return app


spark_app = build("spark")
worker_app = build("worker")
