"""Faults the in-memory broker injects on purpose, so the commit protocol is tested where it breaks.

Each fault is set on ``MemoryBroker.faults`` by a test and seen through the driver interface
exactly as a real client would report it: a failed delivery surfaces at ``flush`` (never at
``send``), an outage makes every request fail with a retriable error and buffers produced
records until the broker is back (or until ``delivery_timeout`` passes, when they fail as
librdkafka's ``message.timeout.ms`` and aiokafka's ``request_timeout_ms`` make them fail).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


class InjectedFault(Exception):
    """Raised (or set on a delivery future) by a fault a test injected."""


class MemoryBrokerUnavailable(InjectedFault):
    """The in-memory broker is in an injected outage; the request may be retried."""

    retriable = True


@dataclass
class Faults:
    """Counters and switches; each counter fails that many of the next calls, then resets."""

    fail_sends: int = 0
    """The next N produced records are not stored; their delivery fails (seen at flush)."""
    fail_send_if: Callable[[str, bytes | None], bool] | None = None
    """Per record: ``(topic, value) -> True`` makes that record's delivery fail."""
    buffer_full: int = 0
    """The next N ``try_send`` calls find the client's buffer full (as librdkafka's BufferError):
    the caller takes the waiting ``send`` path."""
    refuse_delete_records: bool = False
    """DeleteRecords is refused (as by a broker without it, the dev broker)."""
    fail_commits: int = 0
    """The next N consumer offset commits raise."""
    lose_async_commits: int = 0
    """The next N ``commit(wait=False)`` calls are refused after returning (as a commit racing
    a rebalance is): reported through ``take_failed_commits``, like librdkafka's on_commit."""
    fail_txn_commits: int = 0
    """The next N transaction commits raise a retriable error before anything commits."""
    fail_txn_aborts: int = 0
    """The next N transaction aborts raise."""
    end_offsets_short_by: int = 0
    """ListOffsets answers this many records short of the end (as the dev broker does: its
    "latest" is the last batch's base offset + 1); fetches still see the whole log."""
    delivery_timeout: float = 30.0
    """Seconds a record buffered during an outage waits before its delivery fails."""
    unavailable_until: float = 0.0
    """``time.monotonic()`` until which the broker is unreachable (see ``outage``)."""

    def outage(self, seconds: float) -> None:
        """Make the broker unreachable for ``seconds`` from now."""
        self.unavailable_until = time.monotonic() + seconds

    def end_outage(self) -> None:
        self.unavailable_until = 0.0

    @property
    def available(self) -> bool:
        return time.monotonic() >= self.unavailable_until

    def check_available(self, what: str) -> None:
        if not self.available:
            raise MemoryBrokerUnavailable(f"{what}: broker unreachable (injected outage)")

    def take(self, counter: str) -> bool:
        """Consume one unit of ``counter``; True if this call is to fail."""
        left = getattr(self, counter)
        if left > 0:
            setattr(self, counter, left - 1)
            return True
        return False

    def send_fails(self, topic: str, value: bytes | None) -> bool:
        if self.take("fail_sends"):
            return True
        return self.fail_send_if is not None and bool(self.fail_send_if(topic, value))
