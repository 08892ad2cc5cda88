"""Read a topic's records with one group-less consumer (``streamkit consume``, ``dlq replay``).

The end of a partition is where its first fetch response said the log ended (the high
watermark, or the last stable offset under read_committed): ListOffsets "latest" is not trusted,
some brokers (the dev broker) answer it with the last batch's base offset + 1, short of the end.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Sequence

from .base import TP, Consumer, Message

# Where a fetch cannot tell the exact end (librdkafka under read_committed reports the high
# watermark, which may lie past an open transaction's records): a partition that brought nothing
# for this long after reaching its last record counts as read to its end.
SETTLE = 2.0


@dataclass
class Ends:
    """Each partition's end as its first fetch response gave it, and whether that is exact."""

    first: dict[TP, tuple[int, bool]] = field(default_factory=dict)
    last_record: dict[TP, float] = field(default_factory=dict)

    def learn(self, consumer: Consumer, tps: Sequence[TP]) -> None:
        for tp in tps:
            if tp not in self.first:
                end, exact = consumer.fetched_end(tp)
                if end is not None and end >= 0:
                    self.first[tp] = (end, exact)
                    self.last_record.setdefault(tp, time.monotonic())

    async def reached(self, consumer: Consumer, tp: TP, seen: dict[TP, int]) -> bool:
        known = self.first.get(tp)
        if known is None:
            return False
        end, exact = known
        position = await consumer.position(tp)
        if position is None:
            position = seen.get(tp, -1)
        if position >= end:
            return True
        return not exact and time.monotonic() - self.last_record[tp] >= SETTLE


async def read_records(consumer: Consumer, tps: Sequence[TP], *, from_beginning: bool = True,
                       starts: dict[TP, int] | None = None, follow: bool = False,
                       limit: int | None = None, poll: float = 0.2) -> AsyncIterator[Message]:
    """Yield the records of ``tps`` in fetch order (per partition in offset order).

    From each partition's log start (``from_beginning``), from ``starts`` where given, else from
    its end (records written after the read began). Without ``follow`` it stops once every
    partition was read to the end its first fetch reported; with it, it reads on until ``limit``
    records were yielded or the caller stops iterating. The consumer is started, assigned and
    stopped by the caller."""
    tps = list(tps)
    if not tps:
        return
    ends = Ends()
    floor: dict[TP, int] = {}  # reading from the end: records below the end the first fetch gave predate the read
    if from_beginning:
        offsets = await consumer.beginning_offsets(tps)
    else:
        offsets = await consumer.end_offsets(tps)
    offsets.update(starts or {})
    await consumer.assign(tps, offsets)
    from_end = {tp for tp in tps if not from_beginning and tp not in (starts or {})}
    seen: dict[TP, int] = {}  # the next offset after the last record yielded
    count = 0
    while limit is None or count < limit:
        batches = await consumer.getmany(poll, 10000 if limit is None else max(1, min(10000, limit - count)))
        ends.learn(consumer, tps)
        for tp in from_end:
            if tp not in floor and tp in ends.first:
                floor[tp] = ends.first[tp][0]
        for tp, records in batches.items():
            for record in records:
                if tp in from_end and record.offset < floor.get(tp, offsets[tp]):
                    continue
                seen[tp] = record.offset + 1
                ends.last_record[tp] = time.monotonic()
                yield record
                count += 1
                if limit is not None and count >= limit:
                    return
        if not follow and all([await ends.reached(consumer, tp, seen) for tp in tps]):
            return


def isolation(driver_name: str, read_committed: bool) -> dict[str, str]:
    """The consumer override choosing the isolation level, in the driver's own spelling."""
    level = "read_committed" if read_committed else "read_uncommitted"
    return {"isolation.level": level} if driver_name == "confluent" else {"isolation_level": level}


async def topic_partitions(admin: object, topic: str) -> list[TP] | None:
    """The partitions of ``topic``, or None if the broker does not have it."""
    info = (await admin.describe_topics([topic])).get(topic)  # type: ignore[attr-defined]
    return None if info is None else [TP(topic, p) for p in range(info.partitions)]


async def log_ends(consumer: Consumer, tps: Sequence[TP], wait: float = 5.0) -> dict[TP, int]:
    """Each partition's end offset (the high watermark under read_uncommitted): ListOffsets'
    answer, raised to what a fetch response reports where one comes within ``wait`` seconds
    (the dev broker answers ListOffsets short of the end). Assigns ``tps`` to the consumer."""
    tps = list(tps)
    listed = await consumer.end_offsets(tps)
    if not tps:
        return listed
    await consumer.assign(tps, {tp: max(0, listed[tp] - 1) for tp in tps})
    ends = Ends()
    deadline = time.monotonic() + wait
    while len(ends.first) < len(tps) and time.monotonic() < deadline:
        await consumer.getmany(0.2, 1)
        ends.learn(consumer, tps)
    return {tp: max(listed[tp], ends.first.get(tp, (-1, False))[0]) for tp in tps}
