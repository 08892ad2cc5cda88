"""The late-record log line of windowed tables: readable times, how late, and the key."""
import logging
import uuid

import pytest

from streamkit.tables.late import describe_late, utc_ms
from streamkit.testing import wait_for
from tests.unit.tables.test_windows import send_at, windowed_app

T = 1767261600  # 2026-01-01T10:00:00Z


def test_times_are_iso_utc_with_milliseconds_and_lateness_in_seconds():
    assert utc_ms(T * 1000 + 123) == "2026-01-01T10:00:00.123Z"
    line = describe_late("a", T * 1000 + 125, T * 1000 + 4825, 500)
    assert line == ("key 'a': event time 2026-01-01T10:00:00.125Z, stream time 2026-01-01T10:00:04.825Z "
                    "(grace 0.5 s): 4.2 s late")


@pytest.mark.parametrize("window", ["tumbling", "sliding", "session"])
async def test_a_windowed_tables_late_line_is_readable(caplog, window):
    caplog.set_level(logging.WARNING, "streamkit")
    shape = {"tumbling": lambda t: t.tumbling(2, grace=0.5), "sliding": lambda t: t.sliding(2, grace=0.5),
             "session": lambda t: t.session(1, grace=0.5)}[window]
    app, clicks, views, seen, _ = windowed_app(f"late-{uuid.uuid4().hex[:6]}", shape)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        for t in (0.125, 4.825):
            await send_at(clicks, "a", T + t)
        await send_at(clicks, "late-key", T + 0.125)  # behind stream time minus grace: late
        await wait_for(lambda: views.late_records == 1, 10, message="the late record counted")
    lines = [r.getMessage() for r in caplog.records if "late record" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "key 'late-key'" in lines[0] and "event time 2026-01-01T10:00:00.125Z" in lines[0], lines[0]
    assert "stream time 2026-01-01T10:00:04.825Z (grace 0.5 s): 4.2 s late" in lines[0], lines[0]
    assert "e+09" not in lines[0]

