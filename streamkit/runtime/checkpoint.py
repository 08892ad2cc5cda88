"""The commit protocol (at-least-once), in one place.

Every ``commit_interval`` and on every revoke and stop:
1. take, per partition, the offset up to which every subscriber has processed contiguously
   (never past an unprocessed record; records still queued hold the offset back);
2. flush the producer, so every record sent while processing those records is acknowledged;
3. commit those offsets.
A failed flush raises before the commit: the records are reprocessed, never lost.
Exactly-once and table write caches plug in between 1 and 3 (later issues).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterable

from ..transport.base import TP, Consumer, Producer
from .router import Router

log = logging.getLogger("streamkit.checkpoint")


class Checkpoint:
    def __init__(self, router: Router, consumer: Consumer, producer: Producer) -> None:
        self.router = router
        self.consumer = consumer
        self.producer = producer
        self.committed: dict[TP, int] = {}
        self.lock = asyncio.Lock()
        self.last_duration = 0.0
        self.commits = 0

    def offsets_to_commit(self, tps: Iterable[TP] | None = None) -> dict[TP, int]:
        """Step 1: contiguous progress per partition, only where it moved since the last commit."""
        delivered = self.router.delivered
        wanted = delivered if tps is None else {tp: delivered[tp] for tp in tps if tp in delivered}
        offsets: dict[TP, int] = {}
        for tp, delivered in wanted.items():
            offset = delivered
            for subscriber in self.router.subscribers_of(tp.topic):
                first = subscriber.first_unprocessed(tp)
                if first is not None and first < offset:
                    offset = first
            if self.committed.get(tp) != offset:
                offsets[tp] = offset
        return offsets

    async def commit(self, tps: Iterable[TP] | None = None) -> dict[TP, int]:
        """Run the protocol once; returns what was committed."""
        async with self.lock:
            started = time.monotonic()
            offsets = self.offsets_to_commit(tps)
            await self.producer.flush()
            if offsets:
                await self.consumer.commit(offsets)
                self.committed.update(offsets)
                self.commits += 1
            self.last_duration = time.monotonic() - started
            return offsets

    def forget(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self.committed.pop(tp, None)
