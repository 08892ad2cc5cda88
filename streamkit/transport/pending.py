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

    __slots__ = ("_futures", "_topics")

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[Any]] = []
        self._topics: list[str] = []  # each future's topic, for the failure message

    def add(self, fut: asyncio.Future[Any], topic: str = "") -> None:
        self._futures.append(fut)
        self._topics.append(topic)

    def __len__(self) -> int:
        return len(self._futures)

    async def settle(self) -> None:
        """Wait for every queued delivery and raise ``DeliveryFailed`` if any of them failed.

        Every future's outcome is read (a failure left unread would be logged by asyncio as
        "never retrieved" and, worse, forgotten); a cancelled wait leaves them for the next call.
        """
        count = len(self._futures)
        if not count:
            return
        futures, topics = self._futures[:count], self._topics[:count]  # taken together, before any wait
        unfinished = [f for f in futures if not f.done()]  # after a flush, usually none
        if unfinished:
            await asyncio.wait(unfinished)
        if len(self._futures) >= count and self._futures[count - 1] is futures[-1]:
            self._futures = self._futures[count:]  # sends made while waiting stay for next time
            self._topics = self._topics[count:]
        else:  # another settle (a flush beside the checkpoint) took some of them while this one waited
            taken = set(map(id, futures))
            kept = [(f, t) for f, t in zip(self._futures, self._topics, strict=True) if id(f) not in taken]
            self._futures, self._topics = [f for f, _ in kept], [t for _, t in kept]
        failures: list[BaseException] = []
        failed_topics: list[str] = []
        for fut, topic in zip(futures, topics, strict=True):
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
        futures, self._futures, self._topics = self._futures, [], []
        for fut in futures:
            if fut.done() and not fut.cancelled():
                fut.exception()
            elif not fut.done():
                fut.add_done_callback(_read_outcome)


def _read_outcome(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
