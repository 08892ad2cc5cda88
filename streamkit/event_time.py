"""A point in time as epoch milliseconds: the millisecond it falls in, as Kafka counts them.

Kafka's record timestamps are whole milliseconds, and Faust's windows place an event time by
float arithmetic (``ts - ts % size``), so an event at 59.9996 s belongs to second 59 and to
the minute [0, 60). Rounding to the nearest millisecond put it at 60.000 s, in the next
minute's window. A float is truncated here, with half a microsecond of allowance: a whole
number of ms divided by 1000 (Faust's ``message.timestamp``, sent on) is off by at most ~0.25
µs at today's epoch, and must come back as the same ms. A datetime is converted exactly.
Durations (a window's size, a grace) are not points in time: they stay rounded.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
_FLOAT_SLACK_MS = 0.0005  # a ms/1000 float times 1000 lands within ~0.00025 ms of the ms


def epoch_ms(when: float | datetime) -> int:
    """``when`` (epoch seconds, or a datetime: a naive one is local time, as
    ``datetime.timestamp()`` reads it) as the epoch millisecond it falls in."""
    if isinstance(when, datetime):
        aware = when if when.tzinfo is not None else when.astimezone()
        return (aware - _EPOCH) // _MS
    return math.floor(when * 1000 + _FLOAT_SLACK_MS)
