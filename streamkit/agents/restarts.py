"""How often an agent that fails outside a record (or returns) is started again, and when not.

A failure while holding records is the record's (retries, then the error policy); one holding
none is the agent's own code: restarting it at once loops hot and hides the bug. So each restart
in a row waits longer (``FIRST_DELAY`` doubling to ``MAX_DELAY``), and after ``agent_max_restarts``
of them without progress the agent is failed. Progress (a record taken since the last start,
or a run of ``HEALTHY_RUN`` seconds) starts the count again: a restart now and then is no loop.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

FIRST_DELAY = 0.1
MAX_DELAY = 5.0
HEALTHY_RUN = 60.0

Position = tuple[Any, Any, int]  # a stream, the batch in its hand, the index of its last record there


def positions(streams: Sequence[Any]) -> list[Position]:
    """Where each stream's cursor is: read twice, a difference means records were taken.
    Read at each start and failure only, so the per-record path pays nothing for it."""
    return [(stream, getattr(stream, "_batch", None), getattr(stream, "_idx", 0)) for stream in streams]


def moved(before: list[Position], after: list[Position]) -> bool:
    """A stream holds a batch it did not hold at ``before``, or is further in it."""
    was = {id(stream): (batch, idx) for stream, batch, idx in before}
    for stream, batch, idx in after:
        if batch is None:
            continue  # a finished batch let go: its records counted when they were taken
        old = was.get(id(stream))
        if old is None or old[0] is not batch or old[1] != idx:
            return True
    return False


class RestartBudget:
    """One agent task's restarts in a row: ``started()`` at each run, ``failed()`` after it."""

    def __init__(self, limit: int, streams: Callable[[], Sequence[Any]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.in_a_row = 0  # restarts since the last progress
        self.last_error: str | None = None  # the streak's last error, to log its traceback only once
        self._streams = streams
        self._clock = clock
        self._since = clock()
        self._at_start: list[Position] = []

    def started(self) -> None:
        self._since = self._clock()
        self._at_start = positions(self._streams())

    def failed(self) -> float | None:
        """The delay before the next start, or None: the limit is reached, the agent is failed."""
        if self._clock() - self._since >= HEALTHY_RUN or moved(self._at_start, positions(self._streams())):
            self.in_a_row, self.last_error = 0, None
        if self.in_a_row >= self.limit:
            return None
        self.in_a_row += 1
        return min(MAX_DELAY, FIRST_DELAY * 2 ** (self.in_a_row - 1))

    def repeats(self, exc: BaseException) -> bool:
        """The same error as the streak's last (its traceback was logged): one line will do."""
        error = f"{type(exc).__name__}: {exc}"
        same, self.last_error = error == self.last_error, error
        return same
