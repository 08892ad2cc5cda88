"""The commit protocol (at-least-once), in one place.

Every ``commit_interval`` and on every revoke and stop:
1. take, per partition, the offset up to which every subscriber has processed contiguously
   (never past an unprocessed record; records still queued hold the offset back);
2. snapshot the tables' write caches (same tick) and send one changelog record per changed key;
3. flush the producer, so sink, changelog and DLQ records are all acknowledged;
4. commit those offsets;
5. only then write the table batches (with their changelog offsets) to the stores.
A failure before 4 puts the table changes back and raises: the records are reprocessed, and
nothing is lost. Exactly-once (a later issue) wraps 2-4 in one transaction.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

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
        self.observers: list[Any] = []  # called with each commit's duration (metrics)
        self.commits = 0
        self.participants: list[Any] = []  # table managers: prepare/send/apply/abort

    def offsets_to_commit(self, tps: Iterable[TP] | None = None, *, changed_only: bool = True) -> dict[TP, int]:
        """Step 1: contiguous progress per partition (by default only where it moved since the
        last commit; a fire-and-forget commit may have been lost, so revoke and stop re-send all)."""
        delivered = self.router.delivered
        wanted = delivered if tps is None else {tp: delivered[tp] for tp in tps if tp in delivered}
        offsets: dict[TP, int] = {}
        for tp, delivered in wanted.items():
            offset = delivered
            for subscriber in self.router.subscribers_of(tp.topic):
                first = subscriber.first_unprocessed(tp)
                if first is not None and first < offset:
                    offset = first
            if not changed_only or self.committed.get(tp) != offset:
                offsets[tp] = offset
        return offsets

    async def commit(self, tps: Iterable[TP] | None = None, *, wait: bool = True) -> dict[TP, int]:
        """Run the protocol once; returns what was committed (``wait=False``: see Consumer.commit)."""
        async with self.lock:
            started = time.monotonic()
            offsets = self.offsets_to_commit(tps, changed_only=not wait)
            # Same tick as the offsets: the table changes that go with them (no await between).
            changes = [(p, p.prepare()) for p in self.participants]
            try:
                sent = [await p.send(c, self.producer) for p, c in changes]
                await self.producer.flush()
                if offsets:
                    await self.consumer.commit(offsets, wait=wait)
            except BaseException:
                for participant, c in changes:
                    participant.abort(c)
                raise
            for (participant, c), result in zip(changes, sent):
                participant.apply(c, result)
            if offsets:
                self.committed.update(offsets)
                self.commits += 1
            self.last_duration = time.monotonic() - started
            for observe in self.observers:
                observe(self.last_duration)
            return offsets

    def forget(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self.committed.pop(tp, None)
