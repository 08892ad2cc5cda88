"""Deleting what the group has processed from its repartition topics (Kafka Streams' purge).

A ``group_by`` record keeps its timestamp (windows and as-of joins downstream read it), so time
retention would delete a re-keyed record of old data, a replay of last month say, minutes after
it was written and before anyone read it: the consumer's position falls off the log start and
``auto_offset_reset`` skips what was lost. Repartition topics are therefore created with
``retention.ms=-1``, and this purge keeps them small instead: every
``repartition_purge_interval`` it asks the broker for the group's committed offsets (only a
commit the broker holds counts, never one in flight) and deletes the records below them.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

from ..transport.base import TP, Consumer, Driver
from .loops import AdminLoop

log = logging.getLogger("streamkit.purge")

# the topic config of a repartition topic: its records stay until purged
REPARTITION_TOPIC_CONFIG = {"retention.ms": "-1"}
MAX_BACKOFF = 3600.0  # seconds between purges a broker refused


def purged_topics(topics: Iterable[Any]) -> list[str]:
    """The app's internal topics that keep their records until purged (its repartition topics)."""
    return [t.name for t in topics if getattr(t, "internal", False)
            and getattr(t, "config", {}).get("retention.ms") == REPARTITION_TOPIC_CONFIG["retention.ms"]]


class RepartitionPurge(AdminLoop):
    """Deletes committed records of the assigned repartition partitions, one interval at a time."""

    name = "repartition purge"

    def __init__(self, driver: Driver, consumer: Consumer, topics: Iterable[str],
                 assigned: Callable[[], Iterable[TP]], interval: float) -> None:
        super().__init__()
        self.driver = driver
        self.consumer = consumer
        self.topics = frozenset(topics)
        self.assigned = assigned
        self.interval = interval
        self.purged: dict[TP, int] = {}  # the offset each partition was last purged below
        self.refusals = 0

    def wanted(self) -> bool:
        return bool(self.topics) and self.interval > 0

    async def _run(self) -> None:
        wait = self.interval
        while True:
            await asyncio.sleep(wait)
            refusals = self.refusals
            try:
                await self.purge_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next interval tries again; unpurged records only use disk
                self.refusals += 1
                log.log(logging.WARNING if self.refusals == 1 else logging.DEBUG,
                        "purging repartition topics failed (tried again later): %r", exc)
            # a broker that keeps refusing (the dev broker has no DeleteRecords) is asked less often
            wait = min(wait * 2, MAX_BACKOFF) if self.refusals > refusals else self.interval

    async def purge_once(self) -> dict[TP, int]:
        """Delete below the committed offsets that moved since the last purge; what was deleted."""
        tps = sorted(tp for tp in self.assigned() if tp.topic in self.topics)
        if not tps:
            return {}
        committed = await self.consumer.committed(tps)
        due = {tp: offset for tp, offset in committed.items()
               if offset is not None and offset > self.purged.get(tp, 0)}
        if not due:
            return {}
        admin = await self.admin(self._connect)
        refused = await admin.delete_records(due)
        if refused:
            self.refusals += 1
            level = logging.WARNING if self.refusals == 1 else logging.DEBUG
            reasons = "; ".join(f"{tp.topic}[{tp.partition}]: {why}" for tp, why in refused.items())
            log.log(level, "the broker did not delete processed records of repartition topics (%s): they stay "
                    "until a later purge (a broker that keeps refusing is asked less often, up to hourly)", reasons)
        done = {tp: offset for tp, offset in due.items() if tp not in refused}
        self.purged.update(done)
        return done

    async def _connect(self) -> Any:
        admin = self.driver.admin()
        await admin.start()
        return admin
