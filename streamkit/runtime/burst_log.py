"""A rate-limited error log whose held-back lines are reported when their window ends.

A flood of bad records must not stall a worker with log lines, so at most one line a window is
written; the rest are held back. What was held back is summed up (with the last of them) by a
timer when the window ends: waiting for the next error to carry a ``+N more`` would hide the
second error of a burst until another came, possibly never.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any


class BurstLog:
    """``error(msg, *args)``: one line a ``window`` (seconds), the held-back ones summed up at its end.

    A thread timer, not the event loop's: the error policy also runs in Spark tasks (no loop),
    and a summary due when a worker stops is still written."""

    def __init__(self, logger: logging.Logger, window: float = 1.0) -> None:
        self.logger = logger
        self.window = window
        self._lock = threading.Lock()
        self._last = float("-inf")  # when the last line was written
        self._held = 0
        self._held_last: tuple[str, tuple[Any, ...]] | None = None
        self._timer: threading.Timer | None = None

    def error(self, msg: str, *args: Any) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.window:
                self._held += 1
                self._held_last = (msg, args)
                if self._timer is None:
                    self._timer = threading.Timer(self._last + self.window - now, self._flush)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._last = now
            held = self._take()
        more = f" (+{held} more since the last report)" if held else ""  # a timer late: said here
        self.logger.error(msg + "%s", *args, more)

    def _take(self) -> int:
        """What is held back, cleared (with the lock held)."""
        held, self._held, self._held_last = self._held, 0, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return held

    def _flush(self) -> None:
        with self._lock:
            self._timer = None  # this timer: not cancelled by _take
            last = self._held_last
            if last is None:
                return
            held = self._take()
            self._last = time.monotonic()  # a window starts: a flood still gets one line a window
        msg, args = last
        self.logger.error(msg + " (the last of %d held back since the previous report)", *args, held)
