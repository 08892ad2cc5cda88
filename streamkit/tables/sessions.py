"""Session windows: ``app.Table("visits", default=int).session(gap)``.

A key's records less than ``gap`` apart (event time) form one session ``[first, last]``; a record
that falls within ``gap`` of two sessions merges them (Kafka Streams' SessionWindows). Merging
two sessions' values needs a function: ``merge=`` (default ``+``, right for counts, sums and
lists; ``operator.or_`` for sets). A session closes once its partition's stream time passes
``end + gap + grace``: a record at ``end + gap`` still extends it, a later one no longer can. Then its final value is emitted
like any window's (``on_window_close``, ``.final(topic)``) and the session is deleted, or kept
``expires`` longer. A record whose session would already be closed is late: counted, dropped.

Store key: the window key of ``(key, start)`` followed by the end, so a key's sessions are one
ordered range of the store.
"""

from __future__ import annotations

import operator
from datetime import timedelta
from typing import Any, Callable, Iterator

from ..errors import ConfigurationError
from .table import _MISSING, DELETED, TablePartition
from .windows import (
    _SIGN,
    _START,
    LATE_CHOICES,
    STREAM_TIME_KEY,
    Window,
    WindowedTable,
    WindowKeyCodec,
    _ms,
    _PartitionWindows,
    split_window_key,
    window_key,
)


class SessionWindow(Window):
    kind = "session"

    def __init__(
        self,
        gap: float | timedelta,
        *,
        grace: float | timedelta = 0,
        expires: Any = None,
        merge: Callable[[Any, Any], Any] | None = None,
        close_idle_after: Any = None,
        late: str = "drop",
    ) -> None:
        if late not in LATE_CHOICES:
            raise ConfigurationError(f"late={late!r}: use 'drop' or 'dead-letter'")
        self.gap = self.size = self.step = _ms(gap, "gap")
        if self.gap <= 0:
            raise ConfigurationError(f"a session window needs a positive gap, got {gap!r}")
        self.grace = _ms(grace, "grace")
        self.expires = 0 if expires is None else _ms(expires, "expires")  # kept this long after closing
        self.merge = merge or operator.add
        self.close_idle_after = None if close_idle_after is None else _ms(close_idle_after, "close_idle_after")
        self.late = late

    def ranges(self, ts: int) -> list[tuple[int, int]]:
        raise TypeError("session windows have no fixed ranges")

    def holds(self, start: float, end: float, at: float) -> bool:
        return start <= at <= end  # [first record, last record]

    def describe(self) -> str:
        return f"session gap {self.gap / 1000:g}s, grace {self.grace / 1000:g}s"


class SessionKeyCodec(WindowKeyCodec):
    """``(key, start_ms, end_ms)`` <-> store key."""

    name = "session-key"

    def encode(self, composite: tuple[Any, int, int]) -> bytes:  # type: ignore[override]
        key, start, end = composite
        return session_key(self.user.encode(key) or b"", start, end)

    def decode(self, key_bytes: bytes) -> Any:
        if key_bytes == STREAM_TIME_KEY:
            return STREAM_TIME_KEY
        user, start, end = split_session_key(key_bytes)
        return self.user.decode(user), start, end


def session_key(user: bytes, start: int, end: int) -> bytes:
    return window_key(user, start) + _START.pack(end + _SIGN)


def split_session_key(key_bytes: bytes) -> tuple[bytes, int, int]:
    user, start = split_window_key(key_bytes)
    return user, start, _START.unpack_from(key_bytes, len(key_bytes) - _START.size)[0] - _SIGN


class _PartitionSessions(_PartitionWindows):
    def __init__(self, part: TablePartition, now: float) -> None:
        super().__init__(part, now)
        self.open: dict[bytes, dict[tuple[int, int], bytes]] = {}  # key bytes -> open sessions


class SessionTable(WindowedTable):
    """A WindowedTable whose windows are sessions (module docstring)."""

    window: SessionWindow

    def _make_windowed(self, window: Window) -> None:
        super()._make_windowed(window)
        self.key_codec = SessionKeyCodec(self._user_key_codec)  # type: ignore[assignment]
        self.entries.key_codec = self.key_codec

    def _new_state(self, part: TablePartition) -> _PartitionWindows:
        return _PartitionSessions(part, self.app.clock.monotonic())

    def _track_stored(self, state: _PartitionWindows, key_bytes: bytes) -> None:
        assert isinstance(state, _PartitionSessions)
        self._track_session(state, key_bytes)

    def _track_session(self, state: _PartitionSessions, key_bytes: bytes) -> None:
        user, start, end = split_session_key(key_bytes)
        window = self.window
        close_at = end + window.gap + window.grace + 1  # a record at end + gap still extends it
        if state.stream_time is None or close_at > state.stream_time:
            state.close_at(close_at, key_bytes)
            state.open.setdefault(user, {})[(start, end)] = key_bytes
        state.expiring_at.setdefault(close_at + window.expires, set()).add(key_bytes)

    def _untrack(self, state: _PartitionSessions, user: bytes, start: int, end: int, key_bytes: bytes) -> None:
        window = self.window
        close_at = end + window.gap + window.grace + 1  # a record at end + gap still extends it
        state.closing_at.get(close_at, set()).discard(key_bytes)
        state.expiring_at.get(close_at + window.expires, set()).discard(key_bytes)
        state.open.get(user, {}).pop((start, end), None)

    # -- the record path ----------------------------------------------------------------------

    def change_windows(self, key: Any, ts: int, change: Callable[[Any], Any], *, advance: bool) -> None:
        """Extend, start or merge ``key``'s session at ``ts``, then apply ``change`` to it."""
        state, now, user = self._begin(key, ts, advance)
        assert isinstance(state, _PartitionSessions)
        window = self.window
        sessions = state.open.get(user, {})
        touching = sorted(span for span in sessions if span[0] - window.gap <= ts <= span[1] + window.gap)
        start = min([ts, *(s for s, _ in touching)])
        end = max([ts, *(e for _, e in touching)])
        if end + window.gap + window.grace < now:
            self._late(state, key, ts, now, [(start, end)])
            self._close_due(state, now)
            return
        part = state.part
        value: Any = _MISSING
        for s, e in touching:
            key_bytes = sessions[(s, e)]
            old = self._read(key_bytes, part)
            if old is not _MISSING:
                value = old if value is _MISSING else window.merge(value, old)
            self._untrack(state, user, s, e, key_bytes)
            part.cache[key_bytes] = DELETED
        if value is _MISSING:
            value = self.default() if self.default is not None else None
        key_bytes = session_key(user, start, end)
        self._write(part, key_bytes, (key, start, end), change(value))
        self._track_session(state, key_bytes)
        self._close_due(state, now)

    def _close_due(self, state: _PartitionWindows, now: int) -> list[bytes]:
        closed = super()._close_due(state, now)
        assert isinstance(state, _PartitionSessions)
        for key_bytes in closed:
            user, start, end = split_session_key(key_bytes)
            state.open.get(user, {}).pop((start, end), None)
        return closed

    def _span(self, key_bytes: bytes) -> tuple[bytes, int, int]:
        return split_session_key(key_bytes)

    # -- reads ----------------------------------------------------------------------------------

    def read(self, key: Any, ts: int) -> Any:
        """The value of ``key``'s session that ``ts`` falls in (its default if none): an open
        session from the index, else a closed one still stored."""
        _, part = self._locate_key(key, writing=False)
        state = self._state(part.number)
        assert isinstance(state, _PartitionSessions)
        for (start, end), key_bytes in state.open.get(self._user_key_codec.encode(key) or b"", {}).items():
            if start <= ts <= end:
                value = self._read(key_bytes, part)
                if value is not _MISSING:
                    return value
        for span, value in self.windows_of(key):
            if span.start * 1000 <= ts <= span.end * 1000:
                return value
        return self.default() if self.default is not None else None

    def _span_of(self, composite: tuple) -> tuple[int, int]:
        return composite[1], composite[2]

    def current_items(self, ts: int) -> Iterator[tuple[Any, Any]]:
        return ((k, v) for (k, s, e), v in self._local_items() if s <= ts <= e)
