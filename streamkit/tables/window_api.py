"""The user-facing side of windowed tables: what ``Table.tumbling()``/``.hopping()`` return.

``table[key] += 1`` updates every window the current time falls in (``WindowSet``); reads pick a
window by the current record's time, the wall clock, or a field of the value. The state and its
closing live in windows.py.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import ConfigurationError
from ..event_time import epoch_ms
from ..streams.stream import current_event
from .sessions import SessionTable, SessionWindow
from .sliding import SlidingTable, SlidingWindow
from .table import WINDOW_FACTORIES, Table
from .windows import TumblingWindow, Window, WindowedTable, WindowRange, _ms, _wall_ms

if TYPE_CHECKING:
    from ..topics import Topic


def _time_of_field(field: Any) -> Callable[[Any], int]:
    """A value's event time (epoch ms) from ``Model.field``, a field name, or a function."""
    if isinstance(field, str):
        name = field
        get: Callable[[Any], Any] = lambda value: getattr(value, name)  # noqa: E731
    elif hasattr(field, "__get__") and not callable(field):
        get = lambda value: field.__get__(value, type(value))  # noqa: E731
    elif callable(field):
        get = field
    else:
        raise ConfigurationError(f"relative_to_field needs Model.field, a field name or a function, got {field!r}")

    def time_of(value: Any) -> int:
        stamp = get(value)
        if isinstance(stamp, (datetime, int, float)):
            return epoch_ms(stamp)  # epoch seconds, as Faust reads them: the ms they fall in
        raise TypeError(f"the window's time field is {type(stamp).__name__}, not a datetime or epoch seconds")

    return time_of


class WindowWrapper:
    """What ``.tumbling()``/``.hopping()`` return: ``table[key] += 1`` updates every window the
    current time falls in; ``table[key].current()``/``.now()``/``.value()``/``.delta(d)`` read."""

    def __init__(self, table: WindowedTable, relative_to: str = "stream", field: Any = None) -> None:
        self.table = table
        self.relative_to = relative_to
        self._field = field
        self._field_time = _time_of_field(field) if relative_to == "field" else None

    # -- time -----------------------------------------------------------------------------------

    def relative_to_stream(self) -> "WindowWrapper":
        return WindowWrapper(self.table, "stream")

    def relative_to_now(self) -> "WindowWrapper":
        return WindowWrapper(self.table, "now")

    def relative_to_field(self, field: Any) -> "WindowWrapper":
        return WindowWrapper(self.table, "field", field)

    def _event_time(self, event: Any = None) -> tuple[int, bool]:
        """(time in ms, whether it is event time that advances the stream time) of ``event``,
        else of the record being processed."""
        if self.relative_to == "now":
            return _wall_ms(self.table.app.clock), True
        event = event if event is not None else current_event()
        if event is None:
            raise RuntimeError(f"windowed table {self.table.name!r} relative to the "
                               f"{'stream' if self.relative_to == 'stream' else 'field'} is written from "
                               "outside a record: use relative_to_now() there")
        if self.relative_to == "field":
            assert self._field_time is not None
            return self._field_time(event.value), True
        if event.timestamp is None:
            raise RuntimeError(f"windowed table {self.table.name!r}: record {event.topic}[{event.partition}]@"
                               f"{event.offset} has no timestamp; use relative_to_field or relative_to_now")
        return int(event.timestamp), True

    def _read_time(self, event: Any = None) -> int:
        if self.relative_to == "now" or (event is None and current_event() is None):
            return _wall_ms(self.table.app.clock)
        return self._event_time(event)[0]

    # -- dict API -------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> "WindowSet":
        return WindowSet(key, self)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, WindowSet):  # ``table[k] += 1``: the WindowSet already applied it
            return
        ts, advance = self._event_time()
        self.table.change_windows(key, ts, lambda _old: value, advance=advance)

    def __delitem__(self, key: Any) -> None:
        raise ConfigurationError("deleting a key of a windowed table is not supported: windows are deleted when "
                                 "they expire (expires=)")

    def items(self) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` of each key's window that the current time falls in."""
        return self.table.current_items(self._read_time())

    def keys(self) -> Iterator[Any]:
        return (k for k, _ in self.items())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self.items())

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    # -- results --------------------------------------------------------------------------------

    def final(self, topic: "Topic") -> "WindowWrapper":
        """Send each window's final value to ``topic`` once when it closes: key = the table key,
        value = ``{"start": s, "end": e, "value": v}`` (seconds), same partition number."""
        self.table.final_topic = topic
        return self

    @property
    def on_window_close(self) -> Any:
        return self.table.on_window_close

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def late_records(self) -> int:
        return self.table.late_records

    def __repr__(self) -> str:
        return f"<WindowWrapper {self.table.name!r} {self.table.window.describe()} relative to {self.relative_to}>"


class WindowSet:
    """One key's windows: arithmetic updates every window the current time falls in."""

    def __init__(self, key: Any, wrapper: WindowWrapper) -> None:
        self.key = key
        self.wrapper = wrapper

    def _apply(self, change: Callable[[Any], Any]) -> "WindowSet":
        ts, advance = self.wrapper._event_time()  # noqa: SLF001 - the window views of the wrapper they belong to
        self.wrapper.table.change_windows(self.key, ts, change, advance=advance)
        return self

    def __iadd__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v + other)

    def __isub__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v - other)

    def __imul__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v * other)

    def __itruediv__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v / other)

    def __ifloordiv__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v // other)

    def __imod__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v % other)

    def __ior__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v | other)

    def __iand__(self, other: Any) -> "WindowSet":
        return self._apply(lambda v: v & other)

    def current(self, event: Any = None) -> Any:
        """The window the time of ``event`` (else of the current record; the wall clock outside
        a record) falls in, as Faust's ``current(event=None)``."""
        return self.wrapper.table.read(self.key, self.wrapper._read_time(event))  # noqa: SLF001 - the window views of the wrapper they belong to

    def now(self) -> Any:
        return self.wrapper.table.read(self.key, _wall_ms(self.wrapper.table.app.clock))

    def value(self, event: Any = None) -> Any:
        """The window the wrapper's time (stream, field or now) falls in."""
        return self.current(event)

    def delta(self, d: float | timedelta, event: Any = None) -> Any:
        """The window the time ``d`` before the current one falls in."""
        return self.wrapper.table.read(self.key, self.wrapper._read_time(event) - _ms(d, "delta"))  # noqa: SLF001 - the window views of the wrapper they belong to

    def __iter__(self) -> Iterator[tuple[WindowRange, Any]]:
        return self.wrapper.table.windows_of(self.key)

    def __repr__(self) -> str:
        return f"<WindowSet {self.key!r} of {self.wrapper.table.name!r}>"


def make_windowed(table: Table, window: Window, cls: type[WindowedTable] = WindowedTable) -> WindowWrapper:
    if table.is_global:
        raise ConfigurationError(f"GlobalTable {table.name!r} cannot be windowed: window a Table")
    if isinstance(table, WindowedTable):
        raise ConfigurationError(f"table {table.name!r} is already windowed")
    if table.changelog_declared:
        raise ConfigurationError(f"table {table.name!r} cannot be windowed with changelog_topic="
                                 f"{table.changelog.name!r}: a windowed changelog holds streamkit's window keys and "
                                 "stream-time records, which the topic's readers would not read; leave out "
                                 "changelog_topic and send each window's value to the topic (on_window_close=)")
    table.__class__ = cls
    table._make_windowed(window)  # type: ignore[attr-defined]  # noqa: SLF001 - the class just set above
    return WindowWrapper(table)  # type: ignore[arg-type]


def tumbling(table: Table, size: Any, **options: Any) -> WindowWrapper:
    return make_windowed(table, TumblingWindow(size, **options))


def hopping(table: Table, size: Any, step: Any, **options: Any) -> WindowWrapper:
    return make_windowed(table, Window(size, step, **options))


def session(table: Table, gap: Any, **options: Any) -> WindowWrapper:
    return make_windowed(table, SessionWindow(gap, **options), SessionTable)


def sliding(table: Table, size: Any, **options: Any) -> WindowWrapper:
    return make_windowed(table, SlidingWindow(size, **options), SlidingTable)


# table.tumbling() & co. call these (table.py's WINDOW_FACTORIES: it cannot import its subclasses)
WINDOW_FACTORIES.update(tumbling=tumbling, hopping=hopping, session=session, sliding=sliding)
