"""Faust's changelog records that streamkit would misread: found at the restore, and refused.

A streamkit app given a Faust app's id (docs/migrating-from-faust.md) restores the changelogs
Faust wrote. Two kinds of Faust table write records whose bytes mean something else here:

- a windowed table: Faust's key is the JSON ``[key, [start, end]]``; streamkit's is the key's
  bytes, length-prefixed, then the window start (windows.py). Read as streamkit's, the length
  prefix is ``["c`` taken as a number (1.5 GB), and every record of the partition fails in the
  agent that reads a window.
- a SetTable: Faust writes one record per operation, keyed by the JSON ``[operation, key]``
  (1 add, 2 discard, 15 update), valued by the element (``[added, removed]`` for an update);
  streamkit writes the whole set under the key. Read as streamkit's, ``[1,"oslo"]`` is a key of
  its own and its value no set: wrong without a word, or dead-lettered one record at a time.

The check runs on each fetched changelog batch before it is applied (recovery.py): such a record
raises ``ForeignChangelog``, naming the table, the changelog partition and offset, the key and
the ways on; the restore fails, so the partition's input stays paused and the worker halts.

A plain table's records read the same where the keys do (raw keys, ``key_type=bytes`` in
Faust; JSON values either way). Faust writes a str key through its json codec, quotes included:
restored here as the key ``'"word"'``. A streamkit app may hold such keys too (read from a
producer that JSON-encodes its keys), so this is not refused: the first such key of a batch is
warned of, once per table.
"""
from __future__ import annotations

import logging
import struct
from operator import itemgetter
from typing import Any, Callable, Iterable, Sequence

import orjson

from ..codecs import KeyCodec, StrCodec
from ..errors import ForeignChangelog
from ..transport.base import TP
from ..transport.columns import Columns
from .marks import MARK_KEY
from .table import Table
from .windows import STREAM_TIME_KEY, WindowedTable

FAUST_SET_OPERATIONS = {1: "add", 2: "discard", 15: "update"}  # faust/tables/sets.py
_LENGTH = struct.Struct(">I")  # a window key's length prefix (windows.py)
_SHORTEST_WINDOW_KEY = _LENGTH.size + 8  # the prefix, no key bytes, the window start
# The first byte of streamkit's windowed changelog keys: a length prefix's high byte (keys under
# 16 MiB), or 0xff (the stream-time entry, checkpoint marks); Faust's JSON starts with "[".
_WINDOW_KEY_FIRST_BYTES = frozenset((0x00, 0xFF))
_OPENING_BRACKET = ord("[")
_first_byte = itemgetter(0)
_SHOWN = 200  # characters of an offending key put in the message
_WAYS_ON = ("A Faust table's state does not carry over: give the table a new name (it starts empty, from a new "
            "changelog; the input goes on from the group's committed offsets), or run `streamkit reset` for the app "
            "(it deletes the changelogs and the group's offsets; the tables are rebuilt from the input still in its "
            "topics). See docs/migrating-from-faust.md, 'Faust's table state'.")

log = logging.getLogger("streamkit.tables")

Check = Callable[[TP, Columns], None]


class ChangelogChecks:
    """The check of each changelog whose table Faust's records would be misread by, by topic."""

    def __init__(self, tables: Iterable[Table]) -> None:
        self.by_topic: dict[str, Check] = {}
        for table in tables:
            check = check_for(table)
            if check is not None:
                self.by_topic[table.changelog.name] = check

    def __call__(self, tp: TP, columns: Columns) -> None:
        check = self.by_topic.get(tp.topic)
        if check is not None:
            check(tp, columns)


def check_for(table: Table) -> Check | None:
    """The check of ``table``'s changelog records, if it has a Faust format streamkit misreads."""
    if isinstance(table, WindowedTable):
        return lambda tp, columns: _check_windowed(table, tp, columns)
    if getattr(table, "set_table", False):
        return lambda tp, columns: _check_set(table, tp, columns)
    if type(table.key_codec) in (KeyCodec, StrCodec):
        return _QuotedKeys(table)
    return None


class _QuotedKeys:
    """Warns, once, of a str key as Faust's json codec writes it (module docstring)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.warned = False

    def __call__(self, tp: TP, columns: Columns) -> None:
        if self.warned:
            return
        for index, key in enumerate(columns.keys[:2]):  # the first key, past a checkpoint mark
            if key is not None and key != MARK_KEY:
                if len(key) >= 2 and key[:1] == b'"' and key[-1:] == b'"' and isinstance(_json(key), str):
                    self.warned = True
                    log.warning("table %r: changelog %r partition %d offset %d holds the key %s, a JSON string, as "
                                "Faust's json codec writes str keys; streamkit reads keys as UTF-8 text, so it is "
                                "restored as the key %r, quotes included. If a Faust app wrote this changelog: %s",
                                self.table.name, tp.topic, tp.partition, columns.offsets[index], _shown(key),
                                key.decode(), _WAYS_ON)
                return


def _first_bytes(keys: Sequence[bytes | None]) -> set[int] | None:
    """The keys' first bytes, in one C-level pass (a restore's cost is per record); None if a
    key is None or empty (then the keys are looked at one by one)."""
    try:
        return set(map(_first_byte, keys))  # type: ignore[arg-type]  # None or b"" raises
    except (TypeError, IndexError):
        return None


def _check_windowed(table: Table, tp: TP, columns: Columns) -> None:
    """Every key must be a window key (or the stream-time entry, or a checkpoint mark). Batches
    whose keys all start as streamkit's do pass on their first bytes alone."""
    first = _first_bytes(columns.keys)
    if first is not None and first <= _WINDOW_KEY_FIRST_BYTES:
        return
    unpack = _LENGTH.unpack_from
    for index, key in enumerate(columns.keys):
        if key is None or key == STREAM_TIME_KEY or key == MARK_KEY:
            continue
        if len(key) < _SHORTEST_WINDOW_KEY or unpack(key)[0] > len(key) - _SHORTEST_WINDOW_KEY:
            raise _refused(table, tp, columns.offsets[index], key, _what_window_key(key))


def _what_window_key(key: bytes) -> str:
    parsed = _json(key)
    if isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], list) and len(parsed[1]) == 2:
        return ("Faust's key of a windowed table, the JSON [key, [start, end]]; streamkit keys a window by the "
                "key's bytes and the window start (a windowed table of this name in a Faust app wrote it)")
    return "which is not a streamkit window key (the key's length-prefixed bytes, then the window start)"


def _check_set(table: Table, tp: TP, columns: Columns) -> None:
    """A record keyed ``[operation, key]`` whose value is no set is Faust's SetTable operation."""
    first = _first_bytes(columns.keys)
    if first is not None and _OPENING_BRACKET not in first:
        return
    values = columns.values
    for index, key in enumerate(columns.keys):
        if key is None or key[:1] != b"[":
            continue
        operation = _faust_set_operation(key)
        value = values[index]
        if operation is not None and value is not None and not _reads_as_set(table, value):
            raise _refused(table, tp, columns.offsets[index], key, (
                f"Faust's SetTable operation ({operation} of the element {value[:_SHOWN]!r}); streamkit's "
                "SetTable changelog holds each key's whole set (a SetTable of this name in a Faust app wrote it)"))


def _faust_set_operation(key: bytes) -> str | None:
    parsed = _json(key)
    if isinstance(parsed, list) and len(parsed) == 2 and type(parsed[0]) is int:
        return FAUST_SET_OPERATIONS.get(parsed[0])
    return None


def _reads_as_set(table: Table, value: bytes) -> bool:
    try:
        return isinstance(table.entries.decode_value(value), (set, frozenset))
    except Exception:
        return False


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _shown(key: bytes) -> str:
    return repr(key[:_SHOWN]) + ("..." if len(key) > _SHOWN else "")


def _refused(table: Table, tp: TP, offset: int, key: bytes, what: str) -> ForeignChangelog:
    return ForeignChangelog(
        f"table {table.name!r} cannot be restored: its changelog {tp.topic!r} partition {tp.partition} offset "
        f"{offset} holds the key {_shown(key)}, {what}. Restored as streamkit's, such records would be misread, so "
        f"the restore stops before applying any of them and the worker halts. {_WAYS_ON}")
