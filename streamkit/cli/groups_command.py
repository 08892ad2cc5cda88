"""``streamkit groups``: a consumer group's committed offsets, end offsets and lag per partition.

With -A, the app's group (its id) over every topic its workers read as a group (the agents'
sources, or the leader topic), plus any other topic the group has offsets for; ``--group``
names any group (the topics it has offsets for). The end is the high watermark, as
kafka-consumer-groups.sh shows it (under exactly-once the last commit marker counts: a group
that read everything shows a lag of 1 on partitions written in transactions).
"""
from __future__ import annotations

import logging
import sys
from typing import Any

import click

from ..transport.base import TP
from ..transport.topic_reading import isolation, log_ends
from .common import Misuse, _admin_driver, load_app, run, with_topic_source


@click.command()
@with_topic_source
@click.option("--group", default=None, help="The consumer group (default with -A: the app's, its id).")
def groups(app_spec: str | None, broker: str | None, driver: str | None, group: str | None) -> None:
    """Committed offset, end offset and lag of a consumer group per partition, and the total lag."""
    from ..runtime.topic_admin import connect_admin

    logging.basicConfig(level="WARNING", stream=sys.stderr)
    if not app_spec and not group:
        raise Misuse("groups needs -A module:app (the app's group) or --group NAME")
    reads: list[str] = []
    if app_spec:
        app = load_app(app_spec)
        group = group or app.id
        if group == app.id:
            topology = run(app.plan_topology())
            reads = sorted(topology.subscribed) or [app.leader_topic.name]
    assert group is not None  # refused above without -A or --group; -A gives the app's id
    drv, address, timeout = _admin_driver(app_spec, broker, driver)

    async def go() -> tuple[dict[TP, int], dict[TP, int], list[str]]:
        admin = await connect_admin(drv, address, timeout)
        try:
            committed = await admin.group_offsets(group)
            names = sorted(set(reads) | {tp.topic for tp in committed})
            described = await admin.describe_topics(names)
        finally:
            await admin.stop()
        tps = [TP(name, p) for name in names if name in described for p in range(described[name].partitions)]
        consumer = drv.consumer(None, **isolation(drv.name, False))
        await consumer.start()
        try:
            ends = await log_ends(consumer, tps)
        finally:
            await consumer.stop()
        return committed, ends, [n for n in names if n not in described]

    committed, ends, missing = run(go())
    click.echo(_table(group, committed, ends, missing))


def _table(group: Any, committed: dict[TP, int], ends: dict[TP, int], missing: list[str]) -> str:
    rows = [("TOPIC", "PARTITION", "COMMITTED", "END", "LAG")]
    total = 0
    for tp in sorted(ends):
        done = committed.get(tp)
        lag = ends[tp] - (done if done is not None else 0)  # nothing committed: all of it is ahead
        total += lag
        rows.append((tp.topic, str(tp.partition), "-" if done is None else str(done), str(ends[tp]), str(lag)))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [f"group {group}"]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines += [f"{name}: not on the broker" for name in missing]
    lines.append(f"total lag {total}")
    return "\n".join(lines)
