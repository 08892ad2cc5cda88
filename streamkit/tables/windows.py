"""Windowed tables: ``app.Table(...).tumbling(size)`` / ``.hopping(size, step)`` as in Faust,
closed by stream time as in Kafka Streams.

State is one table entry per (key, window start). The store key is the key's bytes,
length-prefixed, then the window start (big-endian, sign-flipped), so one key's windows are one
ordered range of the store; the partition is the key's own, so the table stays co-partitioned
with the topic whose records write it.

Time: each record's event time (``relative_to_stream``, the default: the record's timestamp;
``relative_to_field(Model.field)``: a datetime or epoch-seconds field of the value) or the wall
clock (``relative_to_now``). Each partition keeps its *stream time*, the largest event time its
records carried, in the table itself (so it is checkpointed, in the exactly-once transaction,
and recovered with the windows). A window ``[start, end)`` closes when the stream time reaches
``end + grace``: at the next checkpoint its final value goes to ``on_window_close((key, (start,
end)), value)`` (Faust's signature, seconds) and, with ``.final(topic)``, to that topic once, in
the same transaction as the offsets that closed it. A record for a closed window is *late*:
its update to that window is dropped and counted (``late_records``), never merged. Windows are
deleted ``expires`` after their end, as Faust counts it (default ``grace``: when they close),
with changelog tombstones, so the store and the changelog stay bounded.
"""
from __future__ import annotations

import heapq
import inspect
import logging
import struct
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import orjson

from ..errors import ConfigurationError, StreamkitError
from ..event_time import epoch_ms
from ..streams.stream import current_event
from ..transport.partitioner import partition_for_key
from .late import describe_late
from .table import _MISSING, DELETED, Table, TablePartition
from .values import TableEntries

if TYPE_CHECKING:
    from ..codecs import Codec
    from ..topics import Topic

log = logging.getLogger("streamkit.windows")

STREAM_TIME_KEY = b"\xff\xff\xff\xff"  # never a window key: no key is 4 GiB long
_STREAM_TIME_PREFIX = b"\x00\xffstreamkit-stream-time\x00"
_START = struct.Struct(">Q")
_LENGTH = struct.Struct(">I")
_SIGN = 1 << 63


LATE_CHOICES = ("drop", "dead-letter")


class LateRecord(StreamkitError):
    """A record whose event time falls in a window that already closed (dead-letter reason)."""


class WindowRange(NamedTuple):
    """A window, in epoch seconds as Faust gives them: ``[start, end)``."""

    start: float
    end: float


class StreamTime(int):
    """A partition's stream time (epoch ms), stored under ``STREAM_TIME_KEY``."""


def _ms(value: float | timedelta, what: str) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ConfigurationError(f"{what} must not be negative, got {value!r}")
    return round(seconds * 1000)


class Window:
    """Which windows a timestamp falls in (epoch ms): starts at multiples of ``step``."""

    kind = "hopping"

    def __init__(self, size: float | timedelta, step: float | timedelta, *, expires: Any = None,
                 grace: float | timedelta = 0, close_idle_after: float | timedelta | None = None,
                 late: str = "drop") -> None:
        if late not in LATE_CHOICES:
            raise ConfigurationError(f"late={late!r}: use 'drop' (count and drop, the default) or 'dead-letter' "
                                     "(count, and send the record to the dead-letter topic with the reason)")
        self.late = late
        self.size = _ms(size, "size")
        self.close_idle_after = None if close_idle_after is None else _ms(close_idle_after, "close_idle_after")
        self.step = _ms(step, "step")
        self.grace = _ms(grace, "grace")
        if self.size <= 0 or self.step <= 0:
            raise ConfigurationError(f"a window needs a positive size and step, got {size!r} and {step!r}")
        if self.step > self.size:
            raise ConfigurationError(f"hopping step {step!r} is longer than the window {size!r}: records between "
                                     "windows would belong to none")
        self.expires = self._expires(expires)

    def _expires(self, expires: Any) -> int:
        """How long after its end a window is kept (ms): Faust's ``expires``, counted from the
        window's end; at least ``grace``, when the window closes (the default)."""
        kept = self.grace if expires is None else _ms(expires, "expires")
        if kept < self.grace:
            raise ConfigurationError(f"expires={expires!r} is shorter than grace: windows would be deleted before they "
                                     "close; use expires >= grace (counted from the window's end; the default)")
        return kept

    def ranges(self, ts: int) -> list[tuple[int, int]]:
        first = ((ts - self.size) // self.step + 1) * self.step  # the earliest start with start + size > ts
        return [(start, start + self.size) for start in range(first, ts + 1, self.step)]

    def holds(self, start: float, end: float, at: float) -> bool:
        """Whether the window ``[start, end)`` holds the time ``at``."""
        return start <= at < end

    def describe(self) -> str:
        step = "" if self.step == self.size else f", step {self.step / 1000:g}s"
        return (f"{self.kind} {self.size / 1000:g}s{step}, grace {self.grace / 1000:g}s, "
                f"expires {self.expires / 1000:g}s after the end")


class TumblingWindow(Window):
    kind = "tumbling"

    def ranges(self, ts: int) -> list[tuple[int, int]]:
        start = ts - ts % self.size
        return [(start, start + self.size)]

    def __init__(self, size: float | timedelta, *, expires: Any = None, grace: float | timedelta = 0,
                 close_idle_after: float | timedelta | None = None, late: str = "drop") -> None:
        super().__init__(size, size, expires=expires, grace=grace, close_idle_after=close_idle_after, late=late)


def window_key(user: bytes, start: int) -> bytes:
    return _LENGTH.pack(len(user)) + user + _START.pack(start + _SIGN)


def split_window_key(key_bytes: bytes) -> tuple[bytes, int]:
    (length,) = _LENGTH.unpack_from(key_bytes)
    return key_bytes[4:4 + length], _START.unpack_from(key_bytes, 4 + length)[0] - _SIGN


class WindowKeyCodec:
    """``(key, start_ms)`` <-> store key, the key through the table's own key codec."""

    name = "window-key"

    def __init__(self, user: Any) -> None:
        self.user = user

    def encode(self, composite: tuple[Any, int]) -> bytes:
        key, start = composite
        return window_key(self.user.encode(key) or b"", start)

    def decode(self, key_bytes: bytes) -> Any:
        if key_bytes == STREAM_TIME_KEY:
            return STREAM_TIME_KEY
        user, start = split_window_key(key_bytes)
        return self.user.decode(user), start


class WindowedEntries(TableEntries):
    """The table's entries, plus the stream-time entry, whose value no table codec could hold."""

    def carries_key(self, key: Any) -> bool:
        return super().carries_key(key[0])

    def encode(self, key: Any, value: Any) -> bytes | None:
        if isinstance(value, StreamTime):
            return _STREAM_TIME_PREFIX + _START.pack(int(value) + _SIGN)
        return super().encode(key, value)

    def decode_value(self, raw: bytes) -> Any:
        if raw.startswith(_STREAM_TIME_PREFIX):
            return StreamTime(_START.unpack_from(raw, len(_STREAM_TIME_PREFIX))[0] - _SIGN)
        return super().decode_value(raw)

    def decode(self, key_bytes: bytes, raw: bytes) -> tuple[Any, Any]:
        if key_bytes == STREAM_TIME_KEY:
            return STREAM_TIME_KEY, self.decode_value(raw)
        return super().decode(key_bytes, raw)


class _PartitionWindows:
    """One partition's stream time and which of its windows close or expire when."""

    def __init__(self, part: TablePartition, now: float) -> None:
        self.part = part
        self.stream_time: int | None = None
        self.closing_at: dict[int, set[bytes]] = {}  # end + grace -> windows still open
        self.close_times: list[int] = []  # heap of closing_at's keys: the next close is O(1) to see
        self.written_time: int | None = None  # the stream time the table holds (set at checkpoints)
        self.expiring_at: dict[int, set[bytes]] = {}  # start + expires -> windows still stored
        self.closed: list[bytes] = []  # closed since the last checkpoint: emitted at it
        self.active_at = now  # when a record last moved the stream time (close_idle_after; app.clock)
        self.idle_from: int | None = None  # the stream time when the partition went idle
        self.late: list[tuple[Any, str]] = []  # (message, reason) for the dead-letter topic

    def close_at(self, when: int, key_bytes: bytes) -> None:
        waiting = self.closing_at.get(when)
        if waiting is None:
            waiting = self.closing_at[when] = set()
            heapq.heappush(self.close_times, when)
        waiting.add(key_bytes)

    def due(self, now: int) -> list[bytes]:
        """The windows whose close time ``now`` reached, in close-time order."""
        closed: list[bytes] = []
        while self.close_times and self.close_times[0] <= now:
            closed.extend(sorted(self.closing_at.pop(heapq.heappop(self.close_times), ())))
        return closed


class WindowedTable(Table):
    """A Table whose keys are ``(key, window start)``; see the module docstring. Made by
    ``Table.tumbling``/``Table.hopping`` (the table object changes class in place, so the app's
    registry, the topology and the table manager keep the one object)."""

    window: Window
    final_topic: "Topic | None"
    late_records: int
    windows_closed: int
    _windows: dict[int, _PartitionWindows]
    _user_key_codec: Codec  # the table's own key codec, inside the window key codec

    def _make_windowed(self, window: Window) -> None:
        self.window = window
        self.final_topic = None
        self.late_records = 0
        self.windows_closed = 0
        self._windows = {}
        self._emitting: dict[int, tuple[list[tuple[bytes, Any]], list[tuple[Any, str]]]] = {}
        self._user_key_codec = self.key_codec
        self.key_codec = WindowKeyCodec(self.key_codec)  # type: ignore[assignment]
        self._placements = {}  # placed by the plain key codec
        self.entries = WindowedEntries(self.key_codec, self.value_codec, key_declared=self.entries.key_declared)

    def partition_of(self, key_bytes: bytes | None) -> int:
        user = split_window_key(key_bytes)[0] if key_bytes and key_bytes != STREAM_TIME_KEY else b""
        return partition_for_key(user, self.partitions)

    def user_partition(self, key: Any) -> int:
        return partition_for_key(self._user_key_codec.encode(key) or b"", self.partitions)

    key_partition = user_partition

    # -- per-partition window state ---------------------------------------------------------------

    def _state(self, number: int) -> _PartitionWindows:
        return self._state_of(self.local[number])

    def _state_of(self, part: TablePartition) -> _PartitionWindows:
        state = self._windows.get(part.number)
        if state is None or state.part is not part:
            state = self._windows[part.number] = self._rebuild(part)
        return state

    def _locate_key(self, key: Any, *, writing: bool) -> tuple[bytes, TablePartition]:
        """``key``'s own bytes (no window) and its partition, encoded once."""
        user = self._user_key_codec.encode(key) or b""
        return user, self._partition(partition_for_key(user, self.partitions), key, writing)

    def _rebuild(self, part: TablePartition) -> _PartitionWindows:
        """From the store (after an assignment, a recovery or a rolled-back checkpoint)."""
        state = self._new_state(part)
        raw = part.store.get(STREAM_TIME_KEY)
        state.stream_time = state.written_time = int(self.entries.decode_value(raw)) if raw is not None else None
        for key_bytes, _raw in part.store.items():
            if key_bytes != STREAM_TIME_KEY:
                self._track_stored(state, key_bytes)
        return state

    def _new_state(self, part: TablePartition) -> _PartitionWindows:
        return _PartitionWindows(part, self.app.clock.monotonic())

    def _track_stored(self, state: _PartitionWindows, key_bytes: bytes) -> None:
        self._track(state, key_bytes, split_window_key(key_bytes)[1])

    def _track(self, state: _PartitionWindows, key_bytes: bytes, start: int) -> None:
        window = self.window
        close_at = start + window.size + window.grace
        if state.stream_time is None or close_at > state.stream_time:
            state.close_at(close_at, key_bytes)
        state.expiring_at.setdefault(start + window.size + window.expires, set()).add(key_bytes)

    def forget_writes(self, number: int) -> None:
        super().forget_writes(number)
        self._windows.pop(number, None)

    # -- the record path ----------------------------------------------------------------------

    def change_windows(self, key: Any, ts: int, change: Callable[[Any], Any], *, advance: bool) -> None:
        """Apply ``change`` to every open window of ``key`` that ``ts`` falls in."""
        state, now, user = self._begin(key, ts, advance)
        window = self.window
        part = state.part
        late: list[tuple[int, int]] | None = None
        for start, end in window.ranges(ts):
            if end + window.grace <= now:
                late = [*(late or ()), (start, end)]
                continue
            key_bytes = window_key(user, start)
            value = self._read(key_bytes, part)
            if value is _MISSING:
                value = self.default() if self.default is not None else None
                self._track(state, key_bytes, start)
            self._write(part, key_bytes, (key, start), change(value))
        if late:
            self._late(state, key, ts, now, late)
        if state.close_times and state.close_times[0] <= now:
            self._close_due(state, now)

    def _begin(self, key: Any, ts: int, advance: bool) -> tuple[_PartitionWindows, int, bytes]:
        """The checks of a plain write, then the partition's state with its stream time moved
        to ``ts`` (event time); returns the state, the stream time to judge lateness by and
        the key's bytes."""
        user, part = self._locate_key(key, writing=True)
        state = self._state_of(part)
        if advance:
            state.active_at, state.idle_from = self.app.clock.monotonic(), None
            if state.stream_time is None or ts > state.stream_time:
                state.stream_time = ts  # into the table at the checkpoint (take_changes)
        return state, state.stream_time if state.stream_time is not None else ts, user

    def _late(self, state: _PartitionWindows, key: Any, ts: int, now: int, closed: list[tuple[int, int]]) -> None:
        """A record for closed windows: counted, dropped, dead-lettered with ``late='dead-letter'``."""
        window = self.window
        self.late_records += 1
        event = current_event()
        if window.late == "dead-letter" and event is not None:
            spans = ", ".join(f"[{s / 1000:g}, {e / 1000:g})" for s, e in closed)
            state.late.append((event.message, (f"table {self.name!r}: event time {ts / 1000:g}s falls in closed "
                                               f"window(s) {spans} (stream time {now / 1000:g}s, "
                                               f"grace {window.grace / 1000:g}s)")))
        if self.late_records == 1:
            log.warning("table %r: a late record (partition %d, %s): a window closes once the stream time passes "
                        "its end + grace, and updates to a closed window are dropped and counted "
                        "(streamkit_window_late_records_total). Faust never drops them; to accept records this far "
                        "out of order (a group_by interleaves its sources), declare grace= on the window",
                        self.name, state.part.number, describe_late(key, ts, now, window.grace))
        elif self.late_records % 1000 == 0:
            log.warning("table %r: %d late record(s) so far (event time behind a closed window's end + grace); "
                        "their updates to closed windows are dropped", self.name, self.late_records)

    def _close_due(self, state: _PartitionWindows, now: int) -> list[bytes]:
        closed = state.due(now)
        state.closed.extend(closed)
        return closed

    def read(self, key: Any, ts: int) -> Any:
        """The value of the window of ``key`` that ``ts`` falls in (the most recent one if several)."""
        value = self.get((key, self.window.ranges(ts)[-1][0]), _MISSING)
        if value is _MISSING:
            return self.default() if self.default is not None else None
        return value

    def windows_of(self, key: Any) -> Iterator[tuple[WindowRange, Any]]:
        """Every stored window of ``key``, oldest first (a scan of its partition only)."""
        _, part = self._locate_key(key, writing=False)
        found = sorted((self._span_of(composite), value) for composite, value in self._items_of(part)
                       if composite is not STREAM_TIME_KEY and composite[0] == key)
        for (start, end), value in found:
            yield WindowRange(start / 1000, end / 1000), value

    def _span_of(self, composite: tuple) -> tuple[int, int]:
        """(start, end) in ms of a decoded window key."""
        return composite[1], composite[1] + self.window.size

    def current_items(self, ts: int) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` of each key's window that ``ts`` falls in (the most recent one)."""
        start = self.window.ranges(ts)[-1][0]
        return ((k, v) for (k, s), v in self._local_items() if s == start)

    def _local_items(self) -> Iterator[tuple[Any, Any]]:
        return ((k, v) for k, v in super()._local_items() if k is not STREAM_TIME_KEY)

    # -- the checkpoint -------------------------------------------------------------------------

    def take_changes(self) -> dict[int, dict[bytes, bytes | None]]:
        """Closed windows' final values are taken for emitting, expired ones deleted, in the
        same tick as the offsets (so under exactly-once they share its transaction)."""
        self._emitting = {}
        for number, state in list(self._windows.items()):
            part = self.local.get(number)
            if part is None or state.part is not part:
                continue
            self._advance_idle(state)
            emits = []
            for key_bytes in state.closed:
                value = self._read(key_bytes, part)
                if value is not _MISSING:
                    emits.append((key_bytes, value))
            state.closed = []
            now = state.stream_time
            if now is not None:
                for expire_at in sorted(t for t in state.expiring_at if t <= now):
                    for key_bytes in state.expiring_at.pop(expire_at):
                        self._expire(state, key_bytes)
                if now != state.written_time:  # the stream time goes with this checkpoint
                    part.cache[STREAM_TIME_KEY] = StreamTime(now)
                    state.written_time = now
            if emits or state.late:
                self._emitting[number] = (emits, state.late)
                state.late = []
        return super().take_changes()

    def _expire(self, state: _PartitionWindows, key_bytes: bytes) -> None:
        """Delete a window whose ``expires`` passed (a changelog tombstone at this checkpoint)."""
        state.part.cache[key_bytes] = DELETED

    def _advance_idle(self, state: _PartitionWindows) -> None:
        """``close_idle_after``: a partition without records for that long has its stream time
        move with the wall clock from then on, so its windows close (Bytewax's
        ``wait_for_system_duration``, Flink's idleness); a new record takes over again."""
        idle_after = self.window.close_idle_after
        if idle_after is None or state.stream_time is None:
            return
        idle_ms = round((self.app.clock.monotonic() - state.active_at) * 1000)
        if idle_ms < idle_after:
            return
        if state.idle_from is None:
            state.idle_from = state.stream_time
        moved = state.idle_from + idle_ms - idle_after
        if moved > state.stream_time:
            state.stream_time = moved
            self._close_due(state, moved)

    def emitting(self) -> list[int]:
        """Partitions with windows closed (or records late) at this checkpoint."""
        return list(self._emitting)

    def take_emits(self, number: int) -> tuple[list[tuple[Any, WindowRange, Any, bytes]], list[tuple[Any, LateRecord]]]:
        """Partition ``number``'s windows closed at this checkpoint, ``(key, range, value, key
        bytes)``, and its late records for the dead-letter topic, ``(message, reason)``."""
        out = []
        emits, late = self._emitting.pop(number, ([], []))
        for key_bytes, value in emits:
            user, start, end = self._span(key_bytes)
            key = self._user_key_codec.decode(user)
            out.append((key, WindowRange(start / 1000, end / 1000), value, user))
        self.windows_closed += len(out)
        return out, [(message, LateRecord(reason)) for message, reason in late]

    def _span(self, key_bytes: bytes) -> tuple[bytes, int, int]:
        """(key bytes, start, end) of a stored window."""
        user, start = split_window_key(key_bytes)
        return user, start, start + self.window.size

    def final_record(self, window: WindowRange, value: Any) -> bytes:
        """What ``.final(topic)`` receives for one closed window."""
        encoded = self.entries.value_codec.encode(value)
        body = orjson.Fragment(encoded) if self.entries._json_values and encoded is not None else value  # noqa: SLF001 - the windowed table's own value codec
        return orjson.dumps({"start": window.start, "end": window.end, "value": body})

    async def window_closed(self, key: Any, window: WindowRange, value: Any) -> None:
        callback = self.on_window_close
        if callback is None:
            return
        try:
            result = callback((key, window), value)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # one failing callback must not stop the checkpoint
            log.error("table %r: on_window_close failed for %r %r: %r", self.name, key, tuple(window), exc,
                      exc_info=exc)




def _wall_ms(clock: Any) -> int:
    """``clock``'s time (the app's: virtual in tests) in ms."""
    return epoch_ms(clock.time())
