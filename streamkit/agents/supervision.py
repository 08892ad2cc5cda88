"""The one loop that runs an agent's body, for the worker (agents/agent.py) and for Spark tasks
(spark/agents.py) alike, so the two cannot diverge.

A body that fails while holding records is run again on the same stream with those records
redelivered, up to ``retries`` times for the record that failed last (a record that later
succeeds, or another record failing, starts a fresh count; nothing accumulates per record); then
the held records go to ``give_up`` (the error policy) and are acknowledged, so one poison record
can neither kill the worker nor stall its partition. An error no retry can fix (``NoRetry``,
streamkit's own such errors, or a type named in ``no_retry``) goes to ``give_up`` at once. What
differs between the two runners is passed in: what a body that returns, or fails holding nothing,
means.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from ..errors import NoRetry
from ..runtime.event import Event
from ..streams.stream import Stream

Hook = Callable[[], Awaitable[None]]


class Retries:
    """Attempts of the record that failed last: ``failed`` returns its attempt number."""

    __slots__ = ("limit", "_failing", "_attempt")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._failing: tuple[str, int, int] | None = None
        self._attempt = 0

    def failed(self, event: Event) -> int:
        where = (event.topic, event.partition, event.offset)
        self._attempt = self._attempt + 1 if where == self._failing else 1
        self._failing = where
        return self._attempt

    def exhausted(self, attempt: int) -> bool:
        return attempt > self.limit

    def reset(self) -> None:
        self._failing, self._attempt = None, 0


def retried(exc: BaseException, no_retry: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether another attempt at the record could succeed: not for ``NoRetry`` errors (streamkit's
    own: a key of another partition, a value that does not decode) nor the types in ``no_retry``."""
    return not isinstance(exc, (NoRetry, *no_retry))


async def supervise(stream: Stream, run_once: Callable[[Stream], Awaitable[None]], *, retries: int,
                    give_up: Callable[[Sequence[Event], BaseException], Awaitable[None]],
                    returned: Hook, crashed: Callable[[BaseException], Awaitable[None]],
                    failed: Callable[[Event, int, BaseException], None] | None = None,
                    no_retry: tuple[type[BaseException], ...] = ()) -> None:
    """Run ``run_once(stream)`` until cancelled (or a BaseException such as a finite stream's end).

    ``returned()``: the body returned normally (it is run again after this).
    ``crashed(exc)``: it failed holding no record (re-raise to stop, return to run it again).
    ``failed(first held event, attempt, exc)``: every failure holding records, before the retry;
    ``attempt`` is 0 for an error that is not retried (``retried``): it goes to ``give_up`` at once.
    ``give_up(held, exc)``: the retries are used up (or the error is not retried); the held
    records are acknowledged after it.
    """
    counter = Retries(retries)
    while True:
        try:
            await run_once(stream)
        except Exception as exc:
            held: Any = stream.held_events()
            if not held:
                await crashed(exc)
                continue
            attempt = counter.failed(held[0]) if retried(exc, no_retry) else 0
            if failed is not None:
                failed(held[0], attempt, exc)
            if attempt and not counter.exhausted(attempt):
                stream.redeliver_held()
                continue
            counter.reset()
            await give_up(held, exc)
            stream.ack_held()
        else:
            await returned()
