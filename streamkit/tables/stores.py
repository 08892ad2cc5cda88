"""Where a table partition's bytes live: RocksDB (rocksdict) or memory.

A store holds encoded keys and values plus the offset of the last changelog record applied,
written in the same atomic batch, so recovery replays only the changelog's tail, and the input
offsets its state goes with (the last checkpoint mark applied, marks.py).
"""
from __future__ import annotations

import os
from collections import deque
from typing import Iterator, cast

from rocksdict import AccessType, Options, Rdict, WriteBatch

from .rocks_options import SharedRocksMemory

DELETED = None  # a ``None`` value in a batch deletes the key (a changelog tombstone)


class Store:
    """One table partition's durable state."""

    def get(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def apply(self, batch: dict[bytes, bytes | None], changelog_offset: int | None,
              sources: bytes | None = None) -> None:
        """Write ``batch`` (None deletes) and remember ``changelog_offset`` and, if given, the
        checkpoint mark ``sources``, atomically."""
        raise NotImplementedError

    @property
    def sources(self) -> bytes | None:
        """The last checkpoint mark applied (marks.py), or None."""
        raise NotImplementedError

    def reset(self) -> None:
        """Empty the store (a standby found ahead of the committed offsets restores from scratch)."""
        raise NotImplementedError

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        raise NotImplementedError

    @property
    def offset(self) -> int | None:
        """Offset of the last changelog record applied, or None for an empty store."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemoryStore(Store):
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self._offset: int | None = None
        self._sources: bytes | None = None

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def apply(self, batch: dict[bytes, bytes | None], changelog_offset: int | None,
              sources: bytes | None = None) -> None:
        data = self.data
        for key, value in batch.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        if changelog_offset is not None:
            self._offset = changelog_offset
        if sources is not None:
            self._sources = sources

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(self.data.items()))

    @property
    def offset(self) -> int | None:
        return self._offset

    @property
    def sources(self) -> bytes | None:
        return self._sources

    def reset(self) -> None:
        self.data.clear()
        self._offset = self._sources = None


_META_CF = "streamkit_meta"
_OFFSET_KEY = b"changelog_offset"
_SOURCES_KEY = b"checkpoint_mark"


class RocksStore(Store):
    """rocksdict in raw mode; the applied changelog offset lives in a separate column family."""

    def __init__(self, path: str, memory: SharedRocksMemory | None = None) -> None:
        self.path = path
        os.makedirs(path, exist_ok=True)
        options = memory.options() if memory is not None else Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        self._db = Rdict(path, options, column_families={_META_CF: Options(raw_mode=True)},
                         access_type=AccessType.read_write())
        self._meta = self._db.get_column_family(_META_CF)
        self._meta_handle = self._db.get_column_family_handle(_META_CF)
        raw = self._meta.get(_OFFSET_KEY)
        self._offset = int(raw) if raw is not None else None
        self._sources: bytes | None = self._meta.get(_SOURCES_KEY)

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def apply(self, batch: dict[bytes, bytes | None], changelog_offset: int | None,
              sources: bytes | None = None) -> None:
        wb = WriteBatch(raw_mode=True)
        if None in batch.values():
            for key, value in batch.items():
                if value is None:
                    wb.delete(key)
                else:
                    wb.put(key, value)
        else:  # no deletes (a restore's usual batch): put them all without a Python loop
            deque(map(wb.put, batch.keys(), batch.values()), 0)
        if changelog_offset is not None:
            wb.put(_OFFSET_KEY, str(changelog_offset).encode(), self._meta_handle)
        if sources is not None:
            wb.put(_SOURCES_KEY, sources, self._meta_handle)
        self._db.write(wb)
        if changelog_offset is not None:
            self._offset = changelog_offset
        if sources is not None:
            self._sources = sources

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        # raw mode: bytes keys and values (the stub types any Rdict's keys and values)
        return iter(cast("Iterator[tuple[bytes, bytes]]", self._db.items()))

    @property
    def offset(self) -> int | None:
        return self._offset

    @property
    def sources(self) -> bytes | None:
        return self._sources

    def reset(self) -> None:
        wb = WriteBatch(raw_mode=True)
        for key in self._db.keys():
            wb.delete(key)
        wb.delete(_OFFSET_KEY, self._meta_handle)
        wb.delete(_SOURCES_KEY, self._meta_handle)
        self._db.write(wb)
        self._offset = self._sources = None

    def close(self) -> None:
        # Column-family objects keep the database (and its LOCK) alive: drop them first.
        self._meta = self._meta_handle = None  # type: ignore[assignment]
        self._db.close()
        self._db = None  # type: ignore[assignment]


def open_store(url: str, data_dir: str, app_id: str, table: str, partition: int,
               memory: SharedRocksMemory | None = None) -> Store:
    """``rocksdb://`` → one RocksDB per table partition under the data dir, sharing the worker's
    ``memory`` (rocks_options.py); ``memory://`` → dict."""
    if url.startswith("memory"):
        return MemoryStore()
    if url.startswith("rocksdb"):
        return RocksStore(os.path.join(data_dir, app_id, table, str(partition)), memory)
    raise ValueError(f"unknown store {url!r}: use rocksdb:// or memory://")
