"""Sliding windows: ``app.Table("amounts", default=int).sliding(size)`` (Kafka Streams'
SlidingWindows, KIP-450; Faust has none).

A window ``[start, start + size]`` (both ends included) exists for every distinct set of a key's
records that fit in ``size``: the window ending at each record (``[t - size, t]``) and the window
starting just after each record that has a successor within ``size`` (``[t + 1, t + 1 + size]``).
So ``table[key].current()`` is the aggregate over the last ``size`` of event time, and the final
values are Kafka Streams' for the same input.

A new record at ``t`` adds at most three windows (its own two, and the right window of the record
before it). Each new window starts from the value of a stored window that held exactly the same
records: one always exists (the left window of its latest record, or the right window of the
record just before its first one), so any aggregate works, not only sums, and nothing is
recomputed from raw records. Then every window that holds ``t`` takes the update.

A window closes when the stream time passes ``end + grace``. A record is late when its own window
``[t - size, t]`` has closed (``t + grace`` behind the stream time): it is dropped and counted
whole (a partial update would leave later windows without a source). Windows are kept until
``end + size + grace`` (the default and the minimum ``expires``, counted from the end as for every
window: ``size + grace``), because a record within grace may still need them as a source.

Store key: the window key of ``(key, start)`` and one byte saying whether a record sits at the
window's end, so a key's record times are known again after a recovery.
"""
from __future__ import annotations

import copy
from bisect import bisect_left, bisect_right, insort
from datetime import timedelta
from typing import Any, Callable, Iterator

from ..errors import ConfigurationError, StreamkitError
from .table import _IMMUTABLE, _MISSING, DELETED, TablePartition
from .windows import (
    Window,
    WindowedTable,
    WindowKeyCodec,
    _ms,
    _PartitionWindows,
    split_window_key,
    window_key,
)

_ENDS_AT_RECORD = b"\x01"
_ENDS_BETWEEN = b"\x00"


class SlidingWindow(Window):
    kind = "sliding"

    def __init__(self, size: float | timedelta, *, grace: float | timedelta = 0, expires: Any = None,
                 close_idle_after: float | timedelta | None = None, late: str = "drop") -> None:
        shortest = _ms(size, "size") + _ms(grace, "grace") + 1  # after the window's end
        if expires is not None and _ms(expires, "expires") < shortest:
            raise ConfigurationError(f"sliding expires={expires!r} is shorter than size + grace (counted from the "
                                     "window's end): a record within grace could need a deleted window; leave expires "
                                     "unset (that minimum)")
        super().__init__(size, size, grace=grace, close_idle_after=close_idle_after, late=late,
                         expires=timedelta(milliseconds=shortest) if expires is None else expires)

    def ranges(self, ts: int) -> list[tuple[int, int]]:
        raise TypeError("sliding windows are made by records, not by a fixed grid")

    def holds(self, start: float, end: float, at: float) -> bool:
        return start <= at <= end


def sliding_key(user: bytes, start: int, ends_at_record: bool) -> bytes:
    return window_key(user, start) + (_ENDS_AT_RECORD if ends_at_record else _ENDS_BETWEEN)


class SlidingKeyCodec(WindowKeyCodec):
    """``(key, start_ms)`` <-> store key; the trailing byte is the table's business."""

    name = "sliding-key"

    def encode(self, composite: tuple[Any, int]) -> bytes:
        key, start = composite
        return sliding_key(self.user.encode(key) or b"", start, False)


class _KeyWindows:
    """One key's stored window starts and record times, both sorted (what a new record reads)."""

    __slots__ = ("starts", "records")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.records: list[int] = []

    def has(self, sorted_list: list[int], value: int) -> bool:
        i = bisect_left(sorted_list, value)
        return i < len(sorted_list) and sorted_list[i] == value

    def discard(self, sorted_list: list[int], value: int) -> None:
        i = bisect_left(sorted_list, value)
        if i < len(sorted_list) and sorted_list[i] == value:
            del sorted_list[i]


class _PartitionSliding(_PartitionWindows):
    def __init__(self, part: TablePartition, now: float) -> None:
        super().__init__(part, now)
        self.keys: dict[bytes, _KeyWindows] = {}


class SlidingTable(WindowedTable):
    """A WindowedTable of sliding windows (module docstring)."""

    window: SlidingWindow

    def _make_windowed(self, window: Window) -> None:
        super()._make_windowed(window)
        self.key_codec = SlidingKeyCodec(self._user_key_codec)  # type: ignore[assignment]
        self.entries.key_codec = self.key_codec

    def _new_state(self, part: TablePartition) -> _PartitionWindows:
        return _PartitionSliding(part, self.app.clock.monotonic())

    def _key_bytes(self, user: bytes, windows: _KeyWindows, start: int) -> bytes:
        return sliding_key(user, start, windows.has(windows.records, start + self.window.size))

    def _track(self, state: _PartitionWindows, key_bytes: bytes, start: int) -> None:
        window = self.window
        close_at = start + window.size + window.grace + 1  # the end is included: closed once past it
        if state.stream_time is None or close_at > state.stream_time:
            state.close_at(close_at, key_bytes)
        state.expiring_at.setdefault(start + window.size + window.expires, set()).add(key_bytes)

    def _track_stored(self, state: _PartitionWindows, key_bytes: bytes) -> None:
        assert isinstance(state, _PartitionSliding)
        user, start = split_window_key(key_bytes)
        windows = state.keys.setdefault(user, _KeyWindows())
        insort(windows.starts, start)
        if key_bytes.endswith(_ENDS_AT_RECORD):
            insort(windows.records, start + self.window.size)
        self._track(state, key_bytes, start)

    def _expire(self, state: _PartitionWindows, key_bytes: bytes) -> None:
        super()._expire(state, key_bytes)
        assert isinstance(state, _PartitionSliding)
        user, start = split_window_key(key_bytes)
        windows = state.keys.get(user)
        if windows is None:
            return
        windows.discard(windows.starts, start)
        if key_bytes.endswith(_ENDS_AT_RECORD):
            windows.discard(windows.records, start + self.window.size)
        if not windows.starts:
            del state.keys[user]

    # -- the record path ----------------------------------------------------------------------

    def change_windows(self, key: Any, ts: int, change: Callable[[Any], Any], *, advance: bool) -> None:
        """Add the windows ``ts`` makes, then apply ``change`` to every window holding ``ts``."""
        state, now, user = self._begin(key, ts, advance)
        assert isinstance(state, _PartitionSliding)
        size = self.window.size
        if ts + self.window.grace < now:  # its own window [ts - size, ts] closed
            self._late(state, key, ts, now, [(ts - size, ts)])
            self._close_due(state, now)
            return
        windows = state.keys.get(user)
        if windows is None:
            windows = state.keys[user] = _KeyWindows()
        part = state.part
        if not windows.has(windows.records, ts):
            self._add_record(state, windows, user, key, ts)
        starts = windows.starts
        for start in starts[bisect_left(starts, ts - size):bisect_right(starts, ts)]:
            key_bytes = self._key_bytes(user, windows, start)
            self._write(part, key_bytes, (key, start), change(self._read(key_bytes, part)))
        self._close_due(state, now)

    def _add_record(self, state: _PartitionSliding, windows: _KeyWindows, user: bytes, key: Any, ts: int) -> None:
        """The windows a record at a new time ``ts`` adds, each holding the records before it."""
        size, records, part = self.window.size, windows.records, state.part
        new = {ts - size}  # its left window
        after = bisect_right(records, ts)
        if after < len(records) and records[after] <= ts + 1 + size:
            new.add(ts + 1)  # its right window: a later record is within size
        if after and ts <= records[after - 1] + 1 + size:
            new.add(records[after - 1] + 1)  # the right window of the record before it
        existing = {start for start in new if windows.has(windows.starts, start)}
        values = {start: self._or_default(self._value_of(windows, user, part, start, start + size))
                  for start in new - existing}
        if (ts - size) in existing:  # a right window whose end is this record: re-keyed, flagged
            old = sliding_key(user, ts - size, False)
            value = self._read(old, part)
            self._untrack(state, old, ts - size)
            part.cache[old] = DELETED
            values[ts - size] = value
            windows.discard(windows.starts, ts - size)
        insort(records, ts)
        for start, value in values.items():
            insort(windows.starts, start)
            key_bytes = self._key_bytes(user, windows, start)
            self._write(part, key_bytes, (key, start), value)
            self._track(state, key_bytes, start)

    def _untrack(self, state: _PartitionWindows, key_bytes: bytes, start: int) -> None:
        window = self.window
        state.closing_at.get(start + window.size + window.grace + 1, set()).discard(key_bytes)
        state.expiring_at.get(start + window.size + window.expires, set()).discard(key_bytes)

    def _or_default(self, value: Any) -> Any:
        if value is _MISSING:
            return self.default() if self.default is not None else None
        return value

    def _value_of(self, windows: _KeyWindows, user: bytes, part: TablePartition, start: int, end: int) -> Any:
        """The aggregate of the key's stored records in ``[start, end]`` (``end = start + size``):
        copied from the stored window with the latest start not after ``start``, which holds
        exactly those records (the left window of the last of them, or the right window of the
        record before the first); ``_MISSING`` when there are none."""
        records, starts, size = windows.records, windows.starts, self.window.size
        first = bisect_left(records, start)
        last = bisect_right(records, end) - 1
        if first > last:
            return _MISSING
        i = bisect_right(starts, start) - 1
        if i < 0 or starts[i] < records[last] - size:
            raise StreamkitError(f"table {self.name!r}: no stored sliding window holds the records in "
                                 f"[{start}, {end}] ms (an expired window was needed: report this)")
        value = self._read(self._key_bytes(user, windows, starts[i]), part)
        return value if type(value) in _IMMUTABLE else copy.deepcopy(value)

    # -- reads ----------------------------------------------------------------------------------

    def read(self, key: Any, ts: int) -> Any:
        """The aggregate over ``[ts - size, ts]``: the key's records of the last ``size``."""
        _, part = self._locate_key(key, writing=False)
        return self._or_default(self._read_at(part, self._user_key_codec.encode(key) or b"", ts))

    def _read_at(self, part: TablePartition, user: bytes, ts: int) -> Any:
        state = self._state(part.number)
        assert isinstance(state, _PartitionSliding)
        windows = state.keys.get(user)
        if windows is None:
            return _MISSING
        try:
            return self._value_of(windows, user, part, ts - self.window.size, ts)
        except StreamkitError:  # long ago: those windows expired
            return _MISSING

    def current_items(self, ts: int) -> Iterator[tuple[Any, Any]]:
        """``(key, aggregate over [ts - size, ts])`` of each key with records in that span."""
        decode = self._user_key_codec.decode
        for number, part in list(self.local.items()):
            state = self._state(number)
            assert isinstance(state, _PartitionSliding)
            for user in list(state.keys):
                value = self._read_at(part, user, ts)
                if value is not _MISSING:
                    yield decode(user), value
