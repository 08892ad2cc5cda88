"""``streamkit consume TOPIC`` (alias ``tail``): print a topic's records, as kafka-console-consumer.

One consumer without a group (nothing is committed, no group appears on the broker). From the
end and following, unless ``--from-beginning``: then it stops at the end the read found (unless
``--follow``). Under read_committed, as the app's own consumers read (``--read-uncommitted``
shows records of open and aborted transactions too).
"""
from __future__ import annotations

import logging
import sys
from typing import Any

import click

from ..transport.topic_reading import isolation, read_records
from .common import Misuse, _admin_driver, load_app, partitions_on_broker, run, with_topic_source
from .record_view import RecordView


@click.command()
@click.argument("topic")
@with_topic_source
@click.option("--from-beginning", is_flag=True, help="Start at each partition's first record (default: its end).")
@click.option("--follow/--no-follow", default=None,
              help="Keep reading new records (default: follow from the end; stop at the end with --from-beginning).")
@click.option("--max", "limit", type=click.IntRange(min=1), default=None, help="Stop after N records.")
@click.option("--partition", "partitions", type=click.IntRange(min=0), multiple=True,
              help="Read only this partition (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object a line: topic, partition, offset, timestamp_ms, timestamp, key, value, headers.")
@click.option("--read-uncommitted", is_flag=True, help="Also show records of open or aborted transactions.")
def consume(topic: str, app_spec: str | None, broker: str | None, driver: str | None, from_beginning: bool,
            follow: bool | None, limit: int | None, partitions: tuple[int, ...], as_json: bool,
            read_uncommitted: bool) -> None:
    """Print the records of TOPIC, decoded with the app's types when -A names the app.

    Without -A keys and values are shown as text when they are UTF-8, else as base64
    (``base64:...``; in --json, ``key_encoding``/``value_encoding`` say which)."""
    logging.basicConfig(level="WARNING", stream=sys.stderr)
    view = RecordView(_declared(app_spec, topic))
    drv, address, timeout = _admin_driver(app_spec, broker, driver)
    follows = (not from_beginning) if follow is None else follow
    shown = view.json_line if as_json else view.text_line
    count = [0]

    async def go() -> None:
        tps = await partitions_on_broker(drv, address, timeout, topic)
        if tps is None:
            raise Misuse(f"topic {topic!r} does not exist (`streamkit topics list` shows the topics)")
        if partitions:
            missing = sorted(set(partitions) - {tp.partition for tp in tps})
            if missing:
                raise Misuse(f"topic {topic!r} has partitions 0..{len(tps) - 1}, not {missing[0]}")
            tps = [tp for tp in tps if tp.partition in partitions]
        consumer = drv.consumer(None, **isolation(drv.name, not read_uncommitted))
        await consumer.start()
        try:
            async for message in read_records(consumer, tps, from_beginning=from_beginning, follow=follows,
                                              limit=limit):
                click.echo(shown(message))
                count[0] += 1
        finally:
            await consumer.stop()

    try:
        run(go())
    except KeyboardInterrupt:  # the usual end of a followed read
        pass
    except BrokenPipeError:  # `| head`: the reader left
        sys.stderr.close()
        return
    click.echo(f"{count[0]} records", err=True)


def _declared(app_spec: str | None, topic: str) -> Any:
    """The app's Topic named ``topic`` (its codecs decode), None without -A; a topic the app does
    not declare is shown raw, with a line saying so."""
    if not app_spec:
        return None
    app = load_app(app_spec)
    known = {t.name: t for t in app.all_topics()}
    if topic not in known:
        click.echo(f"streamkit: {topic!r} is not a topic of app {app.id!r}: showing it raw", err=True)
    return known.get(topic)

