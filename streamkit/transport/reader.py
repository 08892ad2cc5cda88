"""A retrying read loop for consumers outside the group (replies, cluster claims, changelogs)."""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable

from .base import TP, Consumer, Message

log = logging.getLogger("streamkit.reader")


async def read_forever(consumer: Consumer, handle: Callable[[TP, Any], Any], *, name: str,
                       timeout: float = 0.2, max_records: int = 10000,
                       fetch: Callable[[float, int], Awaitable[dict[TP, Any]]] | None = None) -> None:
    """Hand every non-empty fetched batch to ``handle`` (sync or async) until cancelled; fetch
    errors are logged and retried after a second (a broker restart must not end the loop); an
    error of ``handle`` ends it (the caller supervises). ``fetch``: how (default
    ``consumer.getmany``: lists of Messages; ``consumer.getmany_columns`` gives Columns)."""
    fetch = fetch or consumer.getmany
    while True:
        try:
            batches = await fetch(timeout, max_records)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: %r (retrying)", name, exc)
            await asyncio.sleep(1.0)
            continue
        for tp, records in batches.items():
            if len(records):
                result = handle(tp, records)
                if inspect.isawaitable(result):
                    await result


Supervise = Callable[[str, Callable[[], Awaitable[Any]]], "asyncio.Task[Any]"]


class Reader:
    """A started consumer plus the task reading it; ``stop`` ends both. ``supervise`` starts the
    task (the runtime's ``loops.restarting``, a layer above): an error of ``handle`` restarts the
    read with a log line, never leaves a dead reader behind."""

    def __init__(self, consumer: Consumer, handle: Callable[[TP, list[Message]], Awaitable[None] | None], *, name: str,
                 supervise: Supervise) -> None:
        self.consumer = consumer
        self._task = supervise(name, lambda: read_forever(consumer, handle, name=name))

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self.consumer.stop()
