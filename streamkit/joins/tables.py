"""Table-table joins: ``customers.join(addresses, how="left")`` is a table of ``(customer,
address)`` per key, kept up to date as either side changes, with its own changelog.

Both sides are tables of the same app with the same partition count and key bytes, so a key's
three entries live in one partition of one task. Reads (``joined[k]``, ``get``, ``items``) join
the two sides' current values, so they are never stale. The joined table is also materialised:
at every checkpoint, each key either side changed since the last one gets its joined value (or
a tombstone) in the joined table's store and changelog, in the same checkpoint (and exactly-once
transaction) as the writes that changed it. Its changelog topic is the join's output stream:
one record per changed key per checkpoint, as Kafka Streams' KTable-KTable join with caching.

``how``: ``inner`` (both sides have the key), ``left`` (the left side has it; right may be
None), ``outer`` (either has it). ``value=`` combines the two (default: the pair).

Left out: the foreign-key join (Kafka Streams' KIP-213, one side's value naming the other's
key) needs subscription and response topics between differently partitioned tables; see
docs/joins.md for the way to write it with a repartitioned stream today.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import ConfigurationError
from ..tables.table import _MISSING, DELETED, Table, TablePartition

if TYPE_CHECKING:
    from ..types.app import AppProtocol

TABLE_HOWS = ("inner", "left", "outer")


def _pair(left: Any, right: Any) -> tuple[Any, Any]:
    return left, right


class JoinedTable(Table):
    """The table of a table-table join (module docstring). Read-only: the sides write it."""

    def __init__(self, app: "AppProtocol", name: str, left: Table, right: Table, how: str,
                 value: Callable[[Any, Any], Any] | None) -> None:
        if how not in TABLE_HOWS:
            raise ConfigurationError(f"a table-table join is how='inner', 'left' or 'outer', not {how!r}")
        for side in (left, right):
            if side.is_global or side.window is not None or type(side).__name__ in ("VersionedTable", "JoinBuffer"):
                raise ConfigurationError(
                    f"table.join() joins two plain tables; {side!r} is not one (a GlobalTable is joined from a "
                    "stream with stream.join(global_table, on=...); a windowed table's keys are windows)")
        if left.app is not right.app:
            raise ConfigurationError("table.join(): both tables must belong to the same app")
        super().__init__(app, name, key_type=left.key_type, partitions=left.declared_partitions)
        self.left, self.right, self.how = left, right, how
        self.combine = value or _pair
        self.streams: tuple[str, ...] = ()
        self.table = left

    def __repr__(self) -> str:
        return f"<JoinedTable {self.name!r} = {self.left.name} {self.how} join {self.right.name}>"

    def describe(self) -> str:
        return (
            f"table {self.name} = {self.left.name} {self.how} join {self.right.name} (changelog {self.changelog.name})"
        )

    # -- reads: from the sides ------------------------------------------------------------------

    def _joined(self, left: Any, right: Any) -> Any:
        """The joined value of one key's two sides (``_MISSING`` for absent), or ``_MISSING``."""
        how = self.how
        if left is _MISSING and (how != "outer" or right is _MISSING):
            return _MISSING
        if right is _MISSING and how == "inner":
            return _MISSING
        return self.combine(None if left is _MISSING else left, None if right is _MISSING else right)

    def _side(self, table: Table, key_bytes: bytes, number: int) -> Any:
        """A side's current value without lending it (no write-back bookkeeping)."""
        part = table.local.get(number)
        if part is None or not part.ready:
            return _MISSING
        for layer in (part.cache, part.flushing):
            value = layer.get(key_bytes, _MISSING)
            if value is not _MISSING:
                return _MISSING if value is DELETED else value
        lent = part.borrowed.get(key_bytes)
        if lent is not None:
            return lent[1]
        raw = part.store.get(key_bytes)
        return _MISSING if raw is None else table.entries.decode_value(raw)

    def _value(self, key: Any) -> Any:
        key_bytes, part = self._locate(key, writing=False)
        return self._joined(
            self._side(self.left, key_bytes, part.number), self._side(self.right, key_bytes, part.number)
        )

    def __getitem__(self, key: Any) -> Any:
        value = self._value(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._value(key)
        return default if value is _MISSING else value

    def __contains__(self, key: Any) -> bool:
        return self._value(key) is not _MISSING

    def _local_items(self) -> Iterator[tuple[Any, Any]]:
        for number, part in list(self.local.items()):
            if not part.ready:
                continue
            seen: set[bytes] = set()
            for side in (self.left, self.right):
                side_part = side.local.get(number)
                if side_part is None:
                    continue
                for key, _ in side._items_of(side_part):  # noqa: SLF001 - a table-table join scans the side's partition
                    key_bytes = self.key_codec.encode(key) or b""
                    if key_bytes in seen:
                        continue
                    seen.add(key_bytes)
                    value = self._joined(
                        self._side(self.left, key_bytes, number), self._side(self.right, key_bytes, number)
                    )
                    if value is not _MISSING:
                        yield key, value

    def _refuse(self, *args: Any) -> Any:
        raise TypeError(f"{self!r} is written by its sides: write {self.left.name!r} or {self.right.name!r}")

    __setitem__ = __delitem__ = setdefault = pop = update = _refuse  # type: ignore[assignment]

    # -- the checkpoint: materialise what the sides changed ----------------------------------------

    def take_changes(self) -> dict[int, dict[bytes, bytes | None]]:
        """The sides took their changes just before (they are declared first): each key they
        changed gets its joined value, or a tombstone where a joined entry existed."""
        for number, part in self.local.items():
            if not part.ready:
                continue
            changed: dict[bytes, Any] = {}
            for side in (self.left, self.right):
                side_part = side.local.get(number)
                if side_part is not None:
                    for key_bytes in side_part.flushing:
                        changed.setdefault(key_bytes, side_part.keys.get(key_bytes, _MISSING))
            for key_bytes, key in changed.items():
                self._materialise(part, key_bytes, key, number)
        return super().take_changes()

    def _materialise(self, part: TablePartition, key_bytes: bytes, key: Any, number: int) -> None:
        value = self._joined(self._side(self.left, key_bytes, number), self._side(self.right, key_bytes, number))
        if value is _MISSING:
            if part.store.get(key_bytes) is not None or key_bytes in part.flushing:
                part.cache[key_bytes] = DELETED
            return
        if key is not _MISSING and self.entries.carries_key(key):
            part.keys[key_bytes] = key
        part.cache[key_bytes] = value


def table_join(
    left: Table, right: Table, *, how: str, name: str | None, value: Callable[[Any, Any], Any] | None
) -> JoinedTable:
    """The operator behind ``table.join(other, ...)``: registers the joined table with the app."""
    app = left.app
    joined_name = name or f"{left.name}-{right.name}-join"
    if joined_name in app.tables:
        raise ConfigurationError(f"table {joined_name!r} is defined twice: give the join a name=")
    joined = app.tables[joined_name] = JoinedTable(app, joined_name, left, right, how, value)
    app.joins.append(joined)
    return joined
