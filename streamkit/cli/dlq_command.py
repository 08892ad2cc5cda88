"""``streamkit dlq replay -A app``: send dead letters back to the topic they failed in.

Each dead letter names its source in headers (runtime/dead_letters.py); it is sent there, to the
partition it came from, with its original key, value and headers, plus ``streamkit-replay-of``
(``dlq-topic[partition]@offset``). The dead-letter topic is read to the end it had when the
replay began (a record failing again lands after it: no loop) and left as it is. At least once:
every record is acknowledged (flushed) before the counts are reported; a replay that stopped
midway can be run again with ``--from-offset`` (a record replayed twice is processed twice).
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import click

from ..runtime import dead_letters as dl
from ..transport.base import Message
from ..transport.topic_reading import isolation, read_records
from .common import Misuse, _admin_driver, app_option, load_app, partitions_on_broker, run

HEADER_REPLAY_OF = "streamkit-replay-of"
DEAD_LETTER_HEADERS = {dl.HEADER_ERROR, dl.HEADER_ERROR_TYPE, dl.HEADER_STAGE, dl.HEADER_TOPIC, dl.HEADER_PARTITION,
                       dl.HEADER_OFFSET, dl.HEADER_APP}


def header(message: Message, name: str) -> str | None:
    """The last value of header ``name`` as text (a record that failed again carries its
    original headers first, the latest failure last)."""
    for key, value in reversed(message.headers):
        if key == name:
            return value.decode("utf-8", "replace") if value is not None else None
    return None


@dataclass
class Selection:
    """Which dead letters a replay takes."""

    error: str | None = None
    source_topic: str | None = None
    to_offset: int | None = None

    def why_not(self, message: Message) -> str | None:
        """None if ``message`` is to be replayed, else the reason it is skipped."""
        if not header(message, dl.HEADER_TOPIC) or not (header(message, dl.HEADER_PARTITION) or "").isdigit():
            return "not a dead letter"
        if self.to_offset is not None and message.offset > self.to_offset:
            return "after --to-offset"
        if self.source_topic is not None and header(message, dl.HEADER_TOPIC) != self.source_topic:
            return "filtered"
        described = f"{header(message, dl.HEADER_ERROR_TYPE) or ''}: {header(message, dl.HEADER_ERROR) or ''}"
        if self.error is not None and self.error not in described:
            return "filtered"
        return None


def replayed_headers(message: Message) -> list[tuple[str, bytes]]:
    """The record's own headers (the dead letter's are dropped) and where it was replayed from."""
    own = [(k, v) for k, v in message.headers if k not in DEAD_LETTER_HEADERS and k != HEADER_REPLAY_OF]
    return own + [(HEADER_REPLAY_OF, f"{message.topic}[{message.partition}]@{message.offset}".encode())]


def describe(message: Message) -> str:
    return (f"{message.topic}[{message.partition}]@{message.offset} -> {header(message, dl.HEADER_TOPIC)}"
            f"[{header(message, dl.HEADER_PARTITION)}] (was @{header(message, dl.HEADER_OFFSET)}) "
            f"{header(message, dl.HEADER_ERROR_TYPE)}: {header(message, dl.HEADER_ERROR)}")


@click.group()
def dlq() -> None:
    """Work with the app's dead-letter topic."""


@dlq.command()
@app_option
@click.option("--error", default=None, help="Only dead letters whose error (type: message) contains this text.")
@click.option("--source-topic", default=None, help="Only dead letters that failed in this topic.")
@click.option("--from-offset", type=click.IntRange(min=0), default=None,
              help="First dead-letter-topic offset to replay (every partition; default: the first kept).")
@click.option("--to-offset", type=click.IntRange(min=0), default=None,
              help="Last dead-letter-topic offset to replay, included (default: the end at start).")
@click.option("--dry-run", is_flag=True, help="List what would be replayed; send nothing.")
def replay(app_spec: str, error: str | None, source_topic: str | None, from_offset: int | None,
           to_offset: int | None, dry_run: bool) -> None:
    """Send the app's dead letters back to the topics (and partitions) they failed in."""
    logging.basicConfig(level="WARNING", stream=sys.stderr)
    app = load_app(app_spec)
    if from_offset is not None and to_offset is not None and to_offset < from_offset:
        raise Misuse(f"--to-offset {to_offset} is before --from-offset {from_offset}")
    dlq_topic = app.dlq_topic_name
    selection = Selection(error, source_topic, to_offset)
    drv, address, timeout = _admin_driver(app_spec, None, None)
    counts: dict[str, int] = {}

    async def go() -> None:
        tps = await partitions_on_broker(drv, address, timeout, dlq_topic)
        if tps is None:
            raise Misuse(f"the dead-letter topic {dlq_topic!r} does not exist: nothing was dead-lettered yet")
        starts = {tp: from_offset for tp in tps} if from_offset is not None else None
        consumer = drv.consumer(None, **isolation(drv.name, True))
        producer = None if dry_run else drv.producer()
        await consumer.start()
        if producer is not None:
            await producer.start()
        try:
            async for message in read_records(consumer, tps, starts=starts):
                reason = selection.why_not(message)
                if reason is not None:
                    counts[reason] = counts.get(reason, 0) + 1
                    continue
                counts["replayed"] = counts.get("replayed", 0) + 1
                if producer is None:
                    click.echo(describe(message))
                    continue
                await producer.send(header(message, dl.HEADER_TOPIC) or "", message.key, message.value,
                                    partition=int(header(message, dl.HEADER_PARTITION) or ""),
                                    headers=replayed_headers(message))
            if producer is not None:
                await producer.flush()  # at least once: acknowledged before it is reported
        finally:
            if producer is not None:
                await producer.stop()
            await consumer.stop()

    run(go())
    click.echo(_report(counts, dlq_topic, dry_run))


def _report(counts: dict[str, int], dlq_topic: str, dry_run: bool) -> str:
    verb = "would replay" if dry_run else "replayed"
    parts = [f"{verb} {counts.get('replayed', 0)} dead letters from {dlq_topic}"]
    parts += [f"skipped {counts[reason]} {reason}" for reason in ("filtered", "after --to-offset", "not a dead letter")
              if counts.get(reason)]
    return "; ".join(parts)
