"""The error policy's log is rate-limited, but what a burst held back is reported when the
burst's window ends, not only when (if ever) another error comes."""
from __future__ import annotations

import logging
import time

from streamkit.runtime.dead_letters import ErrorPolicy
from streamkit.transport.base import Message


def failed(offset: int) -> Message:
    return Message("orders", 0, offset, None, b"x", [], None)


def test_a_burst_s_held_back_errors_are_reported_when_its_window_ends(caplog):
    policy = ErrorPolicy("skip", "app", "app-dlq")  # one line a second
    caplog.set_level(logging.ERROR, logger="streamkit.errors")
    for offset in range(3):  # one line now, two held back
        policy.judge("decode", failed(offset), ValueError(f"bad {offset}"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "orders[0]@0" in lines[0], lines
    deadline = time.monotonic() + 5
    while len(caplog.records) < 2 and time.monotonic() < deadline:  # no further error comes
        time.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "orders[0]@2" in lines[1] and "bad 2" in lines[1] and "2 held back" in lines[1], lines[1]
    policy.judge("decode", failed(3), ValueError("bad 3"))  # a new window: held, reported alone
    deadline = time.monotonic() + 5
    while len(caplog.records) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and "orders[0]@3" in lines[2] and "1 held back" in lines[2], lines
