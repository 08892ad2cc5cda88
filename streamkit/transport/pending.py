"""Delivery futures since the last flush, so a checkpoint never commits past a failed send."""
from __future__ import annotations

import asyncio
from typing import Any


class DeliveryFailed(Exception):
    """At least one record queued since the last flush was not acknowledged by the broker.

    ``failures`` holds every failed delivery's exception (not only the first), so the log and the
    caller see the whole extent of what must be processed again."""

    def __init__(self, message: str, failures: list[BaseException] | None = None,
                 topics: list[str] | None = None) -> None:
        super().__init__(message)
        self.failures = failures or []
        self.topics = topics or []  # the failed records' topics, where known


def delivery_failed(failures: list[BaseException], topics: list[str] | None = None) -> DeliveryFailed:
    """One exception naming how many deliveries failed, to which topics, and the first reason."""
    first = failures[0]
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    where = ""
    if topics:
        counts: dict[str, int] = {}
        for topic in topics:
            counts[topic] = counts.get(topic, 0) + 1
        where = " to " + ", ".join(f"{topic} ({n})" for topic, n in counts.items())
    return DeliveryFailed(f"{len(failures)} record(s) not delivered{where}: {first!r}{more}", failures, topics)


class PendingDeliveries:
    """Collects futures cheaply (one list append per send) and checks them once per flush."""

    __slots__ = ("_queued",)

    def __init__(self) -> None:
        self._queued: list[tuple[asyncio.Future[Any], str]] = []  # each future with its topic (for the message)

    def add(self, fut: asyncio.Future[Any], topic: str = "") -> None:
        self._queued.append((fut, topic))

    def __len__(self) -> int:
        return len(self._queued)

    async def settle(self) -> None:
        """Wait for every queued delivery and raise ``DeliveryFailed`` if any of them failed.

        Every future's outcome is read (a failure left unread would be logged by asyncio as
        "never retrieved" and, worse, forgotten); a cancelled wait leaves them for the next call.
        Two settles may run at once (a flush beside the checkpoint): each takes exactly the
        deliveries queued when it started, and leaves those queued meanwhile.
        """
        taken = self._queued[:]
        if not taken:
            return
        unfinished = [f for f, _ in taken if not f.done()]  # after a flush, usually none
        if unfinished:
            await asyncio.wait(unfinished)
        queued = self._queued
        if queued[:len(taken)] == taken:  # nobody else took any meanwhile: the usual case
            del queued[:len(taken)]
        else:
            mine = set(map(id, taken))
            self._queued = [pair for pair in queued if id(pair) not in mine]
        failures: list[BaseException] = []
        failed_topics: list[str] = []
        for fut, topic in taken:
            if fut.cancelled():
                failures.append(asyncio.CancelledError("a queued record was cancelled before delivery"))
                failed_topics.append(topic)
                continue
            exc = fut.exception()
            if exc is not None:
                failures.append(exc)
                failed_topics.append(topic)
        if failures:
            raise delivery_failed(failures, [t for t in failed_topics if t]) from failures[0]

    def discard(self) -> None:
        """Forget the futures (an aborted transaction's records), reading their outcomes."""
        queued, self._queued = self._queued, []
        for fut, _ in queued:
            if fut.done() and not fut.cancelled():
                fut.exception()
            elif not fut.done():
                fut.add_done_callback(_read_outcome)


def _read_outcome(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
