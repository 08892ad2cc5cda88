"""``@app.timer`` and ``@app.crontab``: scheduled coroutines that survive their own exceptions.

Schedules are computed from a clock (real by default, virtual in tests), aligned to the start
time so a slow run does not drift the schedule. ``on_leader=True`` runs only on the worker that
owns partition 0 of the app's leader topic.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
from typing import Any, Awaitable, Callable
from zoneinfo import ZoneInfo

from croniter import croniter

from .runtime.loops import restarting

log = logging.getLogger("streamkit.timers")


class Clock:
    """Wall time and sleeping; replace in tests with a virtual clock (``app.clock``): timers,
    crontabs, windows ``relative_to_now`` and ``close_idle_after`` all read it."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        """For durations (idle detection): never jumps with the wall clock."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class Timer:
    """One scheduled function: every ``interval`` seconds, or on a cron expression."""

    def __init__(self, fun: Callable[[], Awaitable[Any]], *, interval: float | None = None, cron: str | None = None,
                 timezone: str | dt.tzinfo | None = None, on_leader: bool = False, name: str | None = None) -> None:
        if (interval is None) == (cron is None):
            raise ValueError("a timer needs exactly one of interval or cron")
        if interval is not None and interval <= 0:
            raise ValueError("timer interval must be > 0")
        if cron is not None and not croniter.is_valid(cron):
            raise ValueError(f"invalid crontab expression {cron!r}")
        self.fun = fun
        self.interval = interval
        self.cron = cron
        self.tz = ZoneInfo(timezone) if isinstance(timezone, str) else (timezone or dt.timezone.utc)
        self.tz_given = timezone is not None  # else the app's ``timezone`` setting applies at start
        self.on_leader = on_leader
        self.name: str = name if name else getattr(fun, "__qualname__", repr(fun))
        self.runs = 0
        self.failures = 0

    def next_fire(self, now: float, start: float) -> float:
        """The first fire time strictly after ``now``."""
        if self.interval is not None:
            elapsed = max(0.0, now - start)
            return start + (int(elapsed // self.interval) + 1) * self.interval
        base = dt.datetime.fromtimestamp(now, self.tz)
        assert self.cron is not None  # a timer has exactly one of interval and cron
        return croniter(self.cron, base).get_next(float)

    async def run(self, clock: Clock, is_leader: Callable[[], bool]) -> None:
        """Fire forever; exceptions are logged with a traceback and the schedule continues."""
        start = clock.time()
        while True:
            fire_at = self.next_fire(clock.time(), start)
            await clock.sleep(fire_at - clock.time())
            if self.on_leader and not is_leader():
                continue
            try:
                await self.fun()
                self.runs += 1
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                log.exception("timer %s failed; it keeps its schedule", self.name)


class Timers:
    """Runs an app's timers as tasks for the lifetime of a worker."""

    def __init__(self, timers: list[Timer], clock: Clock, is_leader: Callable[[], bool]) -> None:
        self.timers = timers
        self.clock = clock
        self.is_leader = is_leader
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        # a timer's own failures are logged by Timer.run and its schedule goes on; anything escaping
        # that (its schedule's arithmetic) restarts it with a log line rather than ending it unseen
        self._tasks = [restarting(f"timer {t.name}", functools.partial(t.run, self.clock, self.is_leader))
                       for t in self.timers]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
