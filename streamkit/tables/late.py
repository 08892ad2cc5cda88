"""How a late record is described in log lines and dead letters: times a person can read.

Event and stream times are epoch milliseconds, near 1.8e12: printed as numbers (``%g``) two such
times look alike (``1.76726e+09s``). Windowed tables and the windowed join both describe a late
record with ``describe_late``.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


def utc_ms(ms: float) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds: ``2026-01-01T10:00:00.123Z``."""
    when = datetime.fromtimestamp(int(ms) // 1000, timezone.utc)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{int(ms) % 1000:03d}Z"


def seconds(ms: float) -> str:
    """A duration in milliseconds as seconds, to the millisecond, without trailing zeros: ``4.2``."""
    text = f"{ms / 1000:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def describe_late(key: Any, ts: float, stream_time: float, grace: float) -> str:
    """``key 'a': event time <ISO>, stream time <ISO> (grace 0.5 s): 4.2 s late``: how far the
    record's event time ``ts`` is behind the stream time minus ``grace`` (all in milliseconds)."""
    return (f"key {key!r}: event time {utc_ms(ts)}, stream time {utc_ms(stream_time)} "
            f"(grace {seconds(grace)} s): {seconds(stream_time - grace - ts)} s late")
