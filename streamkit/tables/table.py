"""Table: a dict inside agents, backed by a store per partition and a compacted changelog.

Writes go to a per-partition write-back cache; each checkpoint sends one changelog record per
changed key (not one per write), and applies the batch to the store only after the commit.
Reads look in the cache, then in the batch being flushed, then in the store.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ..codecs import codec_for
from ..errors import ConfigurationError, StreamkitError
from ..runtime.context import ProcessingContext
from ..runtime.event import processing
from ..transport.partitioner import hash_partition
from .declared_changelog import adopt as adopt_changelog
from .stores import MemoryStore, Store
from .task_keys import check_key_partitioning, task_partition
from .values import ENTRY_PREFIX, TableEntries, TypedJsonCodec

if TYPE_CHECKING:
    from ..topics import Topic
    from ..types.app import AppProtocol

_MISSING = object()
# Values nobody can change in place: read from the store without being watched for changes.
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), tuple, frozenset})
_PLACEMENT_MEMO_TYPES = frozenset({str, bytes, int})  # keys whose placement _place remembers
PLACEMENT_MEMO_SIZE = 1 << 14  # keys remembered per table; emptied when full (a miss costs little)
_processing = processing.get  # the record being processed (streams.current_event)
DELETED = object()  # cache marker: the key was deleted since the last checkpoint


# Table's window factories (tumbling, hopping, session, sliding) make it one of its windowed
# subclasses, which live in modules that import this one (windows.py, sessions.py, sliding.py):
# window_api.py registers the factories here, imported with the tables package
# (tables/__init__.py), so this module never imports them back.
WindowFactory = Callable[..., Any]
WINDOW_FACTORIES: dict[str, WindowFactory] = {}


def _window_factory(kind: str) -> WindowFactory:
    factory = WINDOW_FACTORIES.get(kind)
    if factory is None:
        raise RuntimeError(f"table.{kind}(): no window factory registered; streamkit.tables.window_api registers "
                           "them when streamkit.tables is imported, so import streamkit (not table.py on its own)")
    return factory


class PartitionNotLocal(StreamkitError, KeyError):
    """The key lives in a table partition this worker does not own (or has not recovered).
    ``halts_worker``: it is the partition of the record being processed (see ``_is_own_partition``)."""

    halts_worker = False

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class TablePartition:
    """One partition's store plus the writes not yet checkpointed."""

    __slots__ = ("number", "store", "cache", "flushing", "borrowed", "keys", "ready", "opened")

    def __init__(self, number: int, store: Store) -> None:
        self.number = number
        self.store = store
        self.cache: dict[bytes, Any] = {}
        self.flushing: dict[bytes, Any] = {}
        # Mutable values read from the store since the last checkpoint, with their stored bytes:
        # ``table[k].add(x)`` changes them in place, and the checkpoint sends those that changed.
        self.borrowed: dict[bytes, tuple[bytes, Any]] = {}
        self.keys: dict[bytes, Any] = {}  # keys whose entries carry them (TableEntries)
        self.ready = False
        self.opened = False  # this worker's first changelog block went out with its mark (marks.py)

    def forget_writes(self) -> None:
        """Back to the store's (committed) state."""
        self.cache, self.flushing, self.borrowed, self.keys = {}, {}, {}, {}


class Table:
    """``app.Table(name, default=int)``: ``t[k] += 1`` inside an agent."""

    is_global = False
    window: Any = None  # a windowed table's Window (tables/windows.py)
    changelog_declared = False  # the changelog is a topic the app declared (declared_changelog.py)

    def __init__(self, app: "AppProtocol", name: str, *, default: Callable[[], Any] | None = None, key_type: Any = None,
                 value_type: Any = None, partitions: int | None = None, store: str | None = None,
                 help: str = "", on_window_close: Callable[[Any, Any], Any] | None = None,
                 changelog_topic: "Topic | None" = None, key_partitioning: str = "task") -> None:
        if changelog_topic is not None:  # Faust's changelog_topic=: the table takes the topic's types
            key_type, value_type, partitions = adopt_changelog(app, name, changelog_topic, key_type, value_type,
                                                               partitions)
            self.changelog_declared = True
        self.app = app
        self.context: ProcessingContext = app.processing  # the worker running it, once one does
        # where a key written from a record of another partition goes (tables/task_keys.py)
        self.key_partitioning = check_key_partitioning(name, key_partitioning)
        self.warned_task_keys = False
        self.on_window_close = on_window_close  # windowed tables call it (windows.py)
        self.name = name
        self.default = default
        self.key_type = key_type
        self.value_type = value_type
        self.declared_partitions = partitions
        # Without a declared count, a (non-global) table takes its sources' count. The worker
        # settles (and checks) every count at start (resolve_partitions), before any changelog is
        # created or read; until then ``partitions`` is provisional and no changelog is created.
        self.partitions = partitions or app.conf.topic_partitions
        self._placements: dict[Any, tuple[bytes, int, bool, int]] = {}  # see _place
        self.resolved = self.is_global
        self._store = store
        self.help = help
        self.key_codec = codec_for(key_type, key=True)
        # Without a value_type, values keep their Python type (set stays set): values.py.
        self.value_codec = codec_for(value_type) if value_type is not None else TypedJsonCodec()
        self.entries = TableEntries(self.key_codec, self.value_codec, key_declared=key_type is not None)
        self.changelog: "Topic" = changelog_topic if changelog_topic is not None else app.topic(
            f"{app.id}-{name}-changelog", partitions=self.partitions if self.is_global else partitions, internal=True,
            config={"cleanup.policy": "compact"}, key_serializer="raw", value_serializer="raw",
        )  # written by name with the table's own encoding (manager.py), whatever the topic's codecs
        self.local: dict[int, TablePartition] = {}  # partitions this worker serves
        self._sensors = app.sensors  # sensors.py: told of get/set/del when any are added

    @property
    def store_url(self) -> str:
        """The table's ``store=``, else ``app.conf.store`` as it is when the worker starts."""
        return self._store or self.app.conf.store

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} partitions={self.partitions} store={self.store_url}>"

    # -- windows (windows.py) -------------------------------------------------------------------

    def tumbling(self, size: Any, expires: Any = None, *, grace: Any = 0, close_idle_after: Any = None,
                 late: str = "drop", key_index: bool = False) -> Any:
        """Fixed, non-overlapping windows of ``size`` (seconds or timedelta). ``key_index``
        (Faust) is accepted: windowed tables are always iterable."""
        return _window_factory("tumbling")(self, size, expires=expires, grace=grace,
                                           close_idle_after=close_idle_after, late=late)

    def hopping(self, size: Any, step: Any, expires: Any = None, *, grace: Any = 0, close_idle_after: Any = None,
                late: str = "drop", key_index: bool = False) -> Any:
        """Windows of ``size`` starting every ``step``: a record falls in ``size / step`` of them."""
        return _window_factory("hopping")(self, size, step, expires=expires, grace=grace,
                                          close_idle_after=close_idle_after, late=late)

    def session(self, gap: Any, *, grace: Any = 0, expires: Any = None, merge: Callable[[Any, Any], Any] | None = None,
                close_idle_after: Any = None, late: str = "drop") -> Any:
        """Session windows (tables/sessions.py): a key's records less than ``gap`` apart form one
        session; ``merge`` combines two sessions' values when a record bridges them (default +)."""
        return _window_factory("session")(self, gap, grace=grace, expires=expires, merge=merge,
                                          close_idle_after=close_idle_after, late=late)

    def sliding(self, size: Any, *, grace: Any = 0, expires: Any = None, close_idle_after: Any = None,
                late: str = "drop") -> Any:
        """Sliding windows (tables/sliding.py, Kafka Streams' SlidingWindows): ``current()`` is
        the aggregate over the last ``size`` of event time; a window per distinct set of records."""
        return _window_factory("sliding")(self, size, grace=grace, expires=expires,
                                          close_idle_after=close_idle_after, late=late)

    def join(self, other: "Table", *, how: str = "inner", name: str | None = None,
             value: Callable[[Any, Any], Any] | None = None) -> "Table":
        """A table of this table's and ``other``'s values per key (``(left, right)``, or
        ``value(left, right)``), updated as either changes, with its own changelog
        (streamkit/joins/tables.py). ``how``: inner, left or outer."""
        return self.app.join_tables(self, other, how=how, name=name, value=value)  # joins/ sits above tables

    def emitting(self) -> list[int]:
        """Partitions with windowed results to send at this checkpoint (windows.py)."""
        return []

    def forget_writes(self, number: int) -> None:
        """Back to the store's committed state for partition ``number`` (a rolled-back checkpoint)."""
        part = self.local.get(number)
        if part is not None:
            part.forget_writes()

    @property
    def changelog_topic(self) -> "Topic":
        """Faust's name for the table's changelog topic."""
        return self.changelog

    def as_ansitable(self, *, title: str | None = None, key: str = "Key", value: str = "Value",
                     sort: bool = False, sortkey: Callable[[Any], Any] = lambda item: item[0]) -> str:
        """Faust's ``table.as_ansitable()``: this worker's entries as a text table (for the CLI
        and logs; a worker holds only the partitions it serves)."""
        rows = [(repr(k), repr(v)) for k, v in (sorted(self.items(), key=sortkey) if sort else self.items())]
        widths = [max([len(key), *(len(r[0]) for r in rows)]), max([len(value), *(len(r[1]) for r in rows)])]
        line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        fmt = "| {:<%d} | {:<%d} |" % tuple(widths)
        out = [line, fmt.format(key, value), line, *(fmt.format(*r) for r in rows), line]
        return "\n".join([title or self.name.title(), *out])

    def serve_in_memory(self) -> bool:
        """Serve every partition from an empty memory store, unless a worker serves the table:
        for ``agent.test_context()``, which drops them again (``local = {}``)."""
        if self.local:
            return False
        for number in range(self.partitions):
            part = TablePartition(number, MemoryStore())
            part.ready = True
            self.local[number] = part
        return True

    # -- placement ------------------------------------------------------------------------------

    def partition_of(self, key_bytes: bytes | None) -> int:
        """The partition of ``key_bytes``: hashed each time, as the table's placement memo
        (``_place``) asks once per key and the web router's and joins' lookups are rare."""
        return hash_partition(key_bytes or b"", self.partitions)

    def key_partition(self, key: Any) -> int:
        """The partition ``key`` lives in (web routing)."""
        return self.partition_of(self.key_codec.encode(key))

    def _place(self, key: Any) -> tuple[bytes, int, bool, int]:
        """``key``'s bytes, its partition, whether its bytes give the key back (no entry needs
        to carry it), and the partition count that placement is for.

        A str, bytes or int key's placement is remembered (immutable types only; their equality
        never mixes types, and bool is left out: ``True == 1``): ``table[k] += 1`` then
        ``table[k]`` place one key three times, and hot keys recur. The table's dict-API fast
        paths read this memo directly."""
        memoised = type(key) in _PLACEMENT_MEMO_TYPES
        placed = self._placements.get(key) if memoised else None
        if placed is not None and placed[3] == self.partitions:
            return placed
        return self._placed(key, memoised)

    def _placed(self, key: Any, memoised: bool) -> tuple[bytes, int, bool, int]:
        """``key`` placed anew (``_place``), and remembered if ``memoised``."""
        key_bytes = self.key_codec.encode(key) or b""
        placed = (key_bytes, self.partition_of(key_bytes), not self.entries.carries_key(key), self.partitions)
        if memoised:
            if len(self._placements) >= PLACEMENT_MEMO_SIZE:
                self._placements.clear()
            self._placements[key] = placed
        return placed

    def _locate(self, key: Any, *, writing: bool) -> tuple[bytes, TablePartition]:
        placed = self._place(key)
        return placed[0], self._partition(placed[1], key, writing)

    def _partition(self, number: int, key: Any, writing: bool) -> TablePartition:
        """The partition ``key`` (of partition ``number``) is read or written in, if this worker
        serves it: inside a record of another partition, that record's (tables/task_keys.py)."""
        if not self.is_global:
            event = _processing()  # current_event(), one call less: this runs once per write
            partition = event.partition if event is not None else number  # read once: three hops
            if partition != number and partition >= 0:  # -1: test_context, no key
                number = task_partition(self, number, key, event, writing)
        return self._served(number, key)

    def _served(self, number: int, key: Any) -> TablePartition:
        """Partition ``number``, if this worker serves it and it is recovered."""
        part = self.local.get(number)
        if part is None or not part.ready:
            state = "is recovering" if part is not None else "is not owned by this worker"
            error = PartitionNotLocal(f"table {self.name!r}: partition {number} (key {key!r}) {state}")
            error.halts_worker = self._is_own_partition(number)
            raise error
        return part

    def _is_own_partition(self, number: int) -> bool:
        """True when ``number`` is the partition of the record being processed, in a topic
        co-partitioned with this table: the worker owns that record, so its table partition must
        be here. Missing, it is the worker's state that is wrong, not the record: the worker
        halts (the record is processed again by whoever owns it next) rather than dead-letter it."""
        event = _processing()
        if event is None or self.is_global or not self.context.running or getattr(event, "partition", -1) != number:
            return False
        try:
            return self.context.partition_count(event.topic) == self.partitions
        except Exception:  # noqa: BLE001 - a topic it cannot count: not one it can vouch for
            return False

    # -- dict API -------------------------------------------------------------------------------

    def _read(self, key_bytes: bytes, part: TablePartition) -> Any:
        """The current value; a mutable one is the same object until the next checkpoint, so
        changing it in place (``table[k].add(x)``, ``table[k].field = v``) is a write."""
        value = part.cache.get(key_bytes, _MISSING)
        if value is not _MISSING:
            return _MISSING if value is DELETED else value
        value = part.flushing.get(key_bytes, _MISSING)
        if value is not _MISSING:
            if value is DELETED:
                return _MISSING
            if type(value) not in _IMMUTABLE:  # being flushed: a change now goes in the next one
                part.cache[key_bytes] = value
            return value
        lent = part.borrowed.get(key_bytes)
        if lent is not None:
            return lent[1]
        raw = part.store.get(key_bytes)
        if raw is None:
            return _MISSING
        value = self.entries.decode_value(raw)
        if type(value) not in _IMMUTABLE and not self.is_global:
            part.borrowed[key_bytes] = (raw, value)
            if raw.startswith(ENTRY_PREFIX):  # re-encoded at the checkpoint: with its key
                part.keys[key_bytes] = self.entries.decode(key_bytes, raw)[0]
        return value

    def __getitem__(self, key: Any) -> Any:
        if self._sensors.active:
            self._sensors.call("on_table_get", self, key)
        memoised = type(key) in _PLACEMENT_MEMO_TYPES  # _place, inline: this runs once per read
        placed = self._placements.get(key) if memoised else None
        if placed is None or placed[3] != self.partitions:
            placed = self._placed(key, memoised)
        number, event = placed[1], _processing()
        part = self.local.get(number)
        if part is not None and part.ready and (event is None or self.is_global or event.partition in (number, -1)):
            value = part.cache.get(placed[0], _MISSING)  # a value written since the last checkpoint:
            if value is not _MISSING and value is not DELETED:  # the first place _read looks, inline
                return value
        part = self._partition(number, key, False)
        value = self._read(placed[0], part)
        if value is _MISSING:
            if self.default is None:
                raise KeyError(key)
            value = self.default()
            if _processing() is not None:  # in an agent's record: ``table[k].add(x)`` on a new key is kept;
                self[key] = value  # elsewhere (a web view, a timer) a read stores nothing, as Faust's
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        if self._sensors.active:
            self._sensors.call("on_table_set", self, key, value)
        placed = self._placements.get(key) if type(key) in _PLACEMENT_MEMO_TYPES else None
        if placed is not None and placed[2] and placed[3] == self.partitions and type(value) in _IMMUTABLE:
            # a placed key its bytes give back and a value needing no encoding check (``+= 1``):
            # _partition's checks and _write's store inline; anything else takes the path below
            number = placed[1]
            part = self.local.get(number)
            event = _processing()
            if part is not None and part.ready and (event is None or self.is_global or event.partition == number):
                part.cache[placed[0]] = value
                return
        key_bytes, part = self._locate(key, writing=True)
        self._write(part, key_bytes, key, value)

    def _write(self, part: TablePartition, key_bytes: bytes, key: Any, value: Any) -> None:
        """Write ``value`` under ``key`` (its bytes ``key_bytes``) into ``part``'s cache."""
        carried = self.entries.carries_key(key)
        if type(value) not in _IMMUTABLE:  # fail the record that writes it, not a later checkpoint
            self.entries.encode(key if carried else None, value)
        if carried:
            part.keys[key_bytes] = key
        part.cache[key_bytes] = value

    def __delitem__(self, key: Any) -> None:
        if self._sensors.active:
            self._sensors.call("on_table_del", self, key)
        key_bytes, part = self._locate(key, writing=True)
        if self._read(key_bytes, part) is _MISSING:
            raise KeyError(key)
        part.cache[key_bytes] = DELETED

    def __contains__(self, key: Any) -> bool:
        key_bytes, part = self._locate(key, writing=False)
        return self._read(key_bytes, part) is not _MISSING

    def get(self, key: Any, default: Any = None) -> Any:
        key_bytes, part = self._locate(key, writing=False)
        value = self._read(key_bytes, part)
        return default if value is _MISSING else value

    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        """``dict.pop``, as Faust's tables have it: the value, deleted (a tombstone in the
        changelog); ``default`` (or KeyError) for a key the table lacks."""
        if key not in self:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = self[key]
        del self[key]
        return value

    def update(self, other: Any = (), /, **more: Any) -> None:
        """``dict.update``: each pair written as ``table[key] = value`` is."""
        pairs = other.items() if hasattr(other, "items") else other
        for key, value in pairs:
            self[key] = value
        for key, value in more.items():
            self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        key_bytes, part = self._locate(key, writing=True)
        value = self._read(key_bytes, part)
        if value is _MISSING:
            if self.entries.carries_key(key):
                part.keys[key_bytes] = key
            part.cache[key_bytes] = value = default
        return value

    def _local_items(self) -> Iterator[tuple[Any, Any]]:
        for part in list(self.local.values()):
            if part.ready:
                yield from self._items_of(part)

    def _items_of(self, part: TablePartition) -> Iterator[tuple[Any, Any]]:
        """One partition's pairs: the store under the writes not yet checkpointed."""
        decode_key, decode = self.key_codec.decode, self.entries.decode
        overlay = {**{k: v for k, (_, v) in part.borrowed.items()}, **part.flushing, **part.cache}
        for key_bytes, raw in part.store.items():
            if key_bytes not in overlay:
                yield decode(key_bytes, raw)
        for key_bytes, value in overlay.items():
            if value is not DELETED:
                key = part.keys.get(key_bytes, _MISSING)
                yield (decode_key(key_bytes) if key is _MISSING else key), value

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Pairs of the partitions this worker owns (a GlobalTable: all of them)."""
        return self._local_items()

    def keys(self) -> Iterator[Any]:
        return (k for k, _ in self._local_items())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self._local_items())

    def __len__(self) -> int:
        return sum(1 for _ in self._local_items())

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    # -- checkpoint -----------------------------------------------------------------------------

    def take_changes(self) -> dict[int, dict[bytes, bytes | None]]:
        """Snapshot and encode every partition's changes (one entry per changed key)."""
        encode, keys = self.entries.encode, None
        changes: dict[int, dict[bytes, bytes | None]] = {}
        for number, part in self.local.items():
            if part.borrowed:  # values changed in place since they were read from the store
                for k, (raw, value) in part.borrowed.items():
                    if k not in part.cache and encode(part.keys.get(k), value) != raw:
                        part.cache[k] = value
                part.borrowed = {}
            if not part.cache:
                continue
            part.flushing, part.cache = part.cache, {}
            keys = part.keys
            changes[number] = {k: (None if v is DELETED else encode(keys.get(k), v)) for k, v in part.flushing.items()}
        return changes

    def rewrite(self, number: int, keys: Iterable[bytes]) -> None:
        """Write ``keys`` again at the next checkpoint with their restored values (a tombstone
        for one the store lacks): a changelog block dropped at recovery (marks.py) is then
        overwritten for every later reader."""
        part = self.local[number]
        for key_bytes in keys:
            raw = part.store.get(key_bytes)
            if raw is None:
                part.cache[key_bytes] = DELETED
                continue
            key, value = self.entries.decode(key_bytes, raw)
            if self.entries.carries_key(key):
                part.keys[key_bytes] = key
            part.cache[key_bytes] = value

    def changes_applied(self, number: int) -> None:
        part = self.local.get(number)
        if part is not None:
            for key_bytes in part.flushing:  # the store's entry carries the key now
                if key_bytes not in part.cache:
                    part.keys.pop(key_bytes, None)
            part.flushing = {}

    def changes_dropped(self) -> None:
        """A flush failed: put the snapshot back under newer writes so nothing is lost."""
        for part in self.local.values():
            if part.flushing:
                part.cache = {**part.flushing, **part.cache}
                part.flushing = {}


class GlobalTable(Table):
    """Every worker holds every partition, kept current from the changelog.

    Reads see a write made on another worker after that worker's next checkpoint plus the time
    this worker's changelog reader needs to fetch it: ``commit_interval + fetch_timeout`` plus
    broker latency (about 1.5 s with the defaults).
    """

    is_global = True


def _counts(sources: dict[str, int]) -> str:
    listed = [f"topic {name!r} has {count}" for name, count in sorted(sources.items())]
    return ", ".join([listed[0] + " partitions", *listed[1:]])


def check_copartitioning(table: Table, sources: dict[str, int]) -> str | None:
    """What is wrong with ``table``'s partition count given its app's co-partition group
    (``sources``: source topic → partition count), or None. A table must have as many
    partitions as the topic whose records write to it; which one that is the app cannot see, so
    an undeclared table needs the sources to agree, and a declared count must be one of theirs."""
    if table.is_global or not sources:
        return None
    counts = sorted(set(sources.values()))
    if table.declared_partitions is None:
        if len(counts) == 1:
            return None
        return (f"table {table.name!r} declares no partitions and its app's source topics disagree "
                f"({_counts(sources)}): declare partitions= on the table (app.Table({table.name!r}, "
                f"partitions=N) with N the count of the topic whose records write to it), or group_by the "
                "other streams to repartition them to that count")
    if table.declared_partitions in counts:
        return None
    if len(counts) == 1:
        fix = f"declare partitions={counts[0]} on the table (or leave partitions= out to take it)"
    else:
        fix = f"declare {' or '.join(f'partitions={n}' for n in counts)} on the table, as that topic has"
    return (f"table {table.name!r} has {table.declared_partitions} partitions but no source topic has "
            f"{table.declared_partitions} ({_counts(sources)}): a table must have as many partitions as the "
            f"topic whose records write to it; {fix}, or group_by the stream to repartition it to "
            f"{table.declared_partitions} partitions")


def resolve_partitions(tables: Iterable[Table], sources: dict[str, int]) -> None:
    """Settle every table's partition count from its app's co-partition group ``sources``
    (every source topic agents read, group_by/through topics included, with its partition
    count), or raise one ConfigurationError naming every table that cannot be settled.

    A declared count stays (it must match a source's); an undeclared table takes the sources'
    count when they agree, ``topic_partitions`` when there are none. GlobalTables are exempt:
    they read every partition on every worker.
    """
    tables = list(tables)
    problems = [p for p in (check_copartitioning(t, sources) for t in tables) if p]
    problems += [f"table {t.name!r} has on_window_close but no window: call .tumbling(size) or .hopping(size, step) "
                 "on it (or drop on_window_close)" for t in tables if t.on_window_close and t.window is None]
    if problems:
        raise ConfigurationError("; ".join(problems))
    counts = set(sources.values())
    agreed = counts.pop() if len(counts) == 1 else None  # None: no sources (else it raised above)
    for table in tables:
        if table.declared_partitions is None and not table.is_global:
            table.partitions = agreed or table.app.conf.topic_partitions
        table.resolved = True
        table.changelog.partitions = table.partitions
