"""Is the broker there? One answer for readiness, metrics and the log during an outage.

Fetches simply return nothing while the broker is away (on every client), so a quiet topic and
an outage look alike from the consume loop. When nothing has been fetched for a while the watch
asks the cluster for metadata (``Consumer.check_connection``). The log says once that the
broker is unreachable, then one summary line every ``SUMMARY_EVERY`` seconds, then once that it
is back; the clients' own per-attempt connection errors are rate-limited (transport/quiet.py).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from .loops import restarting

log = logging.getLogger("streamkit.broker")

SUMMARY_EVERY = 30.0


class BrokerWatch:
    def __init__(self, consumer: Any, address: str, *, interval: float = 2.0, timeout: float = 5.0) -> None:
        self.consumer = consumer
        self.address = address
        self.interval = interval
        self.timeout = timeout
        self.down_since: float | None = None
        self.outages = 0
        self.last_error: str = ""
        self._last_summary = 0.0
        self._last_activity = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    @property
    def reachable(self) -> bool:
        return self.down_since is None

    @property
    def down_for(self) -> float:
        return 0.0 if self.down_since is None else time.monotonic() - self.down_since

    def activity(self) -> None:
        """Records arrived: the broker is there (called once per non-empty fetch, cheap)."""
        self._last_activity = time.monotonic()
        if self.down_since is not None:
            self.reached()

    def unreachable(self, reason: BaseException | str) -> None:
        now = time.monotonic()
        self.last_error = reason if isinstance(reason, str) else (str(reason) or repr(reason))
        if self.down_since is None:
            self.down_since = self._last_summary = now
            self.outages += 1
            log.warning("broker %s unreachable (%s): fetching stops, state is kept, and the worker "
                        "waits for it to come back", self.address, self.last_error)
        elif now - self._last_summary >= SUMMARY_EVERY:
            self._last_summary = now
            log.warning("broker %s still unreachable after %.0fs (%s)", self.address, now - self.down_since,
                        self.last_error)

    def reached(self) -> None:
        if self.down_since is not None:
            log.warning("broker %s reachable again after %.0fs", self.address, time.monotonic() - self.down_since)
            self.down_since = None

    def start(self) -> None:
        self._task = restarting("broker watch", self._run)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self.down_since is None and time.monotonic() - self._last_activity < self.interval:
                continue  # records are flowing
            try:
                async with asyncio.timeout(self.timeout + 1):  # wait_for may swallow a cancellation (3.11)
                    await self.consumer.check_connection(self.timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.unreachable(exc)
            else:
                self.reached()
