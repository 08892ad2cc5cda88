"""Sends scheduled by a plain call: Faust's ``topic.send_soon(...)`` without ``await``.

In Faust ``send_soon`` is a plain call that queues the record (an ``on_window_close`` callback
is synchronous code calling it). Here a send the producer cannot take at once (no room, a topic
not created yet) becomes a task. The checkpoint waits for every such task before it flushes the
producer and commits offsets, so a record's scheduled sends go out before its offset is
committed; a scheduled send that failed and that nobody awaited fails that checkpoint (it rolls
back and the records are processed again), never only a warning.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine, Generator

from .errors import StreamkitError

log = logging.getLogger("streamkit.topics")


class ScheduledSendFailed(StreamkitError):
    """A send scheduled by ``send_soon`` without ``await`` failed: the checkpoint rolls back."""


class Sent:
    """A send the producer already took: awaiting it returns at once (any event loop)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # unreachable: it makes this a generator


SENT = Sent()


class ScheduledSend:
    """What ``send_soon`` returns when the send is scheduled: awaiting it waits for the record
    to be queued (and raises its error there, where the caller handles it)."""

    __slots__ = ("task", "awaited")

    def __init__(self, task: asyncio.Task) -> None:
        self.task = task
        self.awaited = False

    def __await__(self) -> Generator[Any, None, None]:
        self.awaited = True
        return self.task.__await__()

    def done(self) -> bool:
        return self.task.done()


class ScheduledSends:
    """The app's scheduled sends still under way, and failures nobody awaited."""

    def __init__(self) -> None:
        self.pending: set[ScheduledSend] = set()
        self.failures: list[tuple[str, BaseException]] = []

    def schedule(self, topic: str, send: Coroutine[Any, Any, Any]) -> ScheduledSend:
        """Run ``send`` now in the background (needs the running event loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            send.close()
            raise RuntimeError(f"send_soon to {topic!r} outside the event loop: call it from the worker's code "
                               "(agents, timers, callbacks)") from None
        scheduled = ScheduledSend(loop.create_task(send, name=f"streamkit-send-soon-{topic}"))
        self.pending.add(scheduled)
        scheduled.task.add_done_callback(lambda task: self._done(topic, scheduled, task))
        return scheduled

    def _done(self, topic: str, scheduled: ScheduledSend, task: asyncio.Task) -> None:
        self.pending.discard(scheduled)
        if task.cancelled():
            exc: BaseException | None = asyncio.CancelledError()
        else:
            exc = task.exception()  # retrieved: an awaiting caller gets it too
        if exc is not None and not scheduled.awaited:
            log.error("a record scheduled with send_soon to %r could not be sent (%r): the next checkpoint rolls "
                      "back and its records are processed again", topic, exc)
            self.failures.append((topic, exc))

    async def settle(self) -> None:
        """Wait until every scheduled send is queued in the producer; raise ScheduledSendFailed
        for one that failed unawaited since the last call."""
        while self.pending:
            await asyncio.gather(*(s.task for s in list(self.pending)), return_exceptions=True)
        if self.failures:
            failures, self.failures = self.failures, []
            topic, exc = failures[0]
            raise ScheduledSendFailed(f"{len(failures)} record(s) scheduled with send_soon could not be sent, the "
                                      f"first to {topic!r}: {exc!r}") from exc
