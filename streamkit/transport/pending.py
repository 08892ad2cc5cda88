"""Delivery futures since the last flush, so a checkpoint never commits past a failed send."""
from __future__ import annotations

import asyncio


class DeliveryFailed(Exception):
    """At least one record queued since the last flush was not acknowledged by the broker."""


class PendingDeliveries:
    """Collects futures cheaply (one list append per send) and checks them once per flush."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future] = []

    def add(self, fut: asyncio.Future) -> None:
        self._futures.append(fut)

    async def settle(self) -> None:
        futures, self._futures = self._futures, []
        if not futures:
            return
        unfinished = [f for f in futures if not f.done()]  # after a flush, usually none
        if unfinished:
            await asyncio.wait(unfinished)
        for fut in futures:
            if fut.cancelled():
                raise DeliveryFailed("a queued record was cancelled before delivery")
            exc = fut.exception()
            if exc is not None:
                raise DeliveryFailed(f"delivery failed: {exc!r}") from exc
