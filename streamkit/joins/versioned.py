"""Versioned tables: ``app.Table(name, history=timedelta(days=7))`` keeps each key's past values
so a stream can join against the value that was valid at a record's own time (as-of joins,
Kafka Streams' versioned stores of KIP-889, Quix's ``join_asof``).

A key's entry is its list of versions ``[(valid_from_ms, value), ...]`` oldest first; ``None``
marks a deletion. A write inside a record adds a version at the record's timestamp (outside a
record: the app clock), in time order even when updates arrive out of order. Versions older
than ``history`` behind the key's newest are pruned, except the newest of them, which is still
the value valid at the start of the history. Everything else (cache, checkpoint, changelog,
recovery, standbys) is the plain Table's: one changelog record per changed key per checkpoint.

``table[k]``, ``get``, ``items`` give the newest value; ``table.as_of(k, when)`` the one valid
at ``when``; changing the newest value in place amends that version (assign to add one).
"""
from __future__ import annotations

import bisect
from datetime import datetime, timedelta
from typing import Any, Iterator

import orjson

from ..codecs import Codec
from ..errors import ConfigurationError, DecodeError
from ..event_time import epoch_ms
from ..streams.stream import current_event
from ..tables.table import _MISSING, Table
from ..tables.values import TableEntries

Versions = list  # [(valid_from_ms, value or None), ...], oldest first


def history_ms(history: Any) -> int:
    seconds = history.total_seconds() if isinstance(history, timedelta) else float(history)
    if seconds <= 0:
        raise ConfigurationError(f"history= must be a positive duration (seconds or timedelta), got {history!r}")
    return round(seconds * 1000)


def when_ms(when: Any) -> int:
    """``when`` as epoch ms: a datetime, or epoch seconds (Faust's unit for times)."""
    return epoch_ms(when if isinstance(when, datetime) else float(when))


class VersionsCodec(Codec):
    """A key's versions as one JSON array, each value through the table's own value codec."""

    name = "versions"

    def __init__(self, inner: Codec) -> None:
        if inner.name not in ("json", "typed-json", "pydantic"):
            raise ConfigurationError(f"history= needs a JSON value codec (the table's is {inner.name!r}): "
                                     "leave value_type out, or give a Record/JSON type")
        self.inner = inner

    def encode(self, versions: Any) -> bytes | None:
        if versions is None:
            return None
        encode = self.inner.encode
        # sized to fit: kept in a checkpoint snapshot, orjson's bytes would each hold ~4 KiB (values.py)
        return bytes(memoryview(orjson.dumps([[ts, None if v is None else _fragment(encode(v))]
                                              for ts, v in versions])))

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            raw = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"invalid versions entry: {exc}") from None
        decode = self.inner.decode
        return [(ts, None if v is None else decode(orjson.dumps(v))) for ts, v in raw]


class VersionedTable(Table):
    """A Table that keeps ``history`` of each key's values (module docstring)."""

    def __init__(self, app: Any, name: str, *, history: Any, **kwargs: Any) -> None:
        super().__init__(app, name, **kwargs)
        self.history_ms = history_ms(history)
        self.value_codec = VersionsCodec(self.value_codec)
        self.entries = TableEntries(self.key_codec, self.value_codec, key_declared=self.entries.key_declared)

    def __repr__(self) -> str:
        return f"<VersionedTable {self.name!r} partitions={self.partitions} history={self.history_ms / 1000:g}s>"

    @staticmethod
    def _now(app: Any) -> int:
        event = current_event()
        if event is not None and event.timestamp is not None:
            return int(event.timestamp)
        return epoch_ms(app.clock.time())

    def _versions(self, key: Any, *, writing: bool) -> tuple[bytes, Any, Versions]:
        key_bytes, part = self._locate(key, writing=writing)
        found = self._read(key_bytes, part)
        return key_bytes, part, ([] if found is _MISSING else found)

    def _add_version(self, key: Any, value: Any) -> None:
        key_bytes, part, old = self._versions(key, writing=True)
        ts = self._now(self.app)
        versions = list(old)
        at = bisect.bisect_right([v[0] for v in versions], ts)
        if at and versions[at - 1][0] == ts:  # the same instant: the later write wins
            versions[at - 1] = (ts, value)
        else:
            versions.insert(at, (ts, value))
        horizon = versions[-1][0] - self.history_ms
        keep_from = max(0, bisect.bisect_right([v[0] for v in versions], horizon) - 1)
        self._write(part, key_bytes, key, versions[keep_from:])

    # -- the dict API, on the newest version ---------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        _, _, versions = self._versions(key, writing=False)
        if versions and versions[-1][1] is not None:
            return versions[-1][1]
        if self.default is None:
            raise KeyError(key)
        value = self.default()
        if current_event() is not None:  # as Table's: a read outside an agent's record stores nothing
            self[key] = value
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        if value is None:
            raise ValueError(f"table {self.name!r}: None cannot be stored (del table[key] deletes)")
        self._add_version(key, value)

    def __delitem__(self, key: Any) -> None:
        _, _, versions = self._versions(key, writing=True)
        if not versions or versions[-1][1] is None:
            raise KeyError(key)
        self._add_version(key, None)

    def __contains__(self, key: Any) -> bool:
        _, _, versions = self._versions(key, writing=False)
        return bool(versions) and versions[-1][1] is not None

    def get(self, key: Any, default: Any = None) -> Any:
        _, _, versions = self._versions(key, writing=False)
        return versions[-1][1] if versions and versions[-1][1] is not None else default

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self[key]
        self[key] = default
        return default

    def _local_items(self) -> Iterator[tuple[Any, Any]]:
        for key, versions in super()._local_items():
            if versions and versions[-1][1] is not None:
                yield key, versions[-1][1]

    # -- history ---------------------------------------------------------------------------------

    def as_of(self, key: Any, when: Any, default: Any = None) -> Any:
        """The value of ``key`` valid at ``when`` (a datetime or epoch seconds): the newest
        version written at or before it; ``default`` if none was (or it was deleted then)."""
        return self.as_of_ms(key, when_ms(when), default)

    def as_of_ms(self, key: Any, ts: int, default: Any = None) -> Any:
        _, _, versions = self._versions(key, writing=False)
        return self.version_at(versions, ts, default)

    @staticmethod
    def version_at(versions: Versions, ts: int, default: Any = None) -> Any:
        at = bisect.bisect_right([v[0] for v in versions], ts)
        if not at or versions[at - 1][1] is None:
            return default
        return versions[at - 1][1]

    def history(self, key: Any) -> list[tuple[float, Any]]:
        """Every kept version of ``key``: ``(valid_from_seconds, value)``, None for a deletion."""
        _, _, versions = self._versions(key, writing=False)
        return [(ts / 1000, value) for ts, value in versions]


def _fragment(encoded: bytes | None) -> orjson.Fragment:
    """The inner codec's bytes of a version's value (not None: bytes) for orjson to embed."""
    assert encoded is not None
    return orjson.Fragment(encoded)
