"""Stream-table joins: each record of a stream with a table's value for its key.

``async for order, customer in orders.join(customers)``: the table's value for the record's key
(``inner``, the default, skips records the table has no value for; ``left`` gives None then).
``on=`` names the join key when it is not the record's key (a Record field, a field name, or a
function of the value): against a GlobalTable it is looked up directly (every worker holds every
key); against a partitioned table the stream is first repartitioned by it through an internal
topic (``group_by``), so the key's table partition is the record's own. ``as_of=True`` reads the
value valid at the record's timestamp from a table declared with ``history=`` (versioned.py).

What "the table's value" is: the value this worker holds when the record is processed, after
every record before it in the same partition; records of the topic that fills the table and of
the joined stream are not ordered by time against each other (Kafka Streams waits
``max.task.idle.ms`` for that; streamkit does not), so a table update and a record arriving
together may meet in either order. As-of joins make the answer independent of that order once
the table's update has been processed.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from ..errors import ConfigurationError, StreamkitError
from ..streams.stream import current_event
from ..tables.table import _MISSING

if TYPE_CHECKING:
    from ..streams.stream import Chainable, Derived
    from ..tables.table import Table

LOOKUP_HOWS = ("inner", "left")


class JoinNotCopartitioned(StreamkitError):
    """A record's key lives in another table partition than the record: the stream and the
    table are not partitioned alike (different partition counts or key serializers)."""


@dataclass(frozen=True)
class JoinDeclared:
    """What the topology shows of one join and checks at start: ``stream`` topics joined
    with ``table`` (same partition count unless the table is global)."""

    agent: str
    streams: tuple[str, ...]
    table: Any
    how: str
    detail: str = ""

    def describe(self) -> str:
        return f"join {' + '.join(self.streams)} with table {self.table.name} ({self.how}{self.detail})"


def key_function(on: Any) -> tuple[str, Callable[[Any], Any]]:
    """``on`` as (name, function of the value)."""
    if isinstance(on, str):
        return on, operator.attrgetter(on)
    if hasattr(on, "__get__") and hasattr(on, "__name__") and not callable(on):  # Record.field
        return on.__name__, operator.attrgetter(on.__name__)
    if callable(on):
        return getattr(on, "__name__", "key"), on
    raise TypeError(f"join on= must be a field, a field name or a function of the value, not {on!r}")


def stream_table_join(source: "Chainable", table: "Table", *, on: Any, how: str, as_of: bool) -> "Derived":
    """The operator behind ``stream.join(table, ...)`` (module docstring)."""
    from ..streams.stream import Stream
    from ..tables.table import Table as TableClass
    from .versioned import VersionedTable

    if not isinstance(table, TableClass) or getattr(table, "window", None) is not None:
        raise TypeError(f"stream.join() takes a Table or GlobalTable (or, declared on topics, "
                        f"topic.join(other_topic, within=...)), not {table!r}")
    if how not in LOOKUP_HOWS:
        raise ConfigurationError(f"a stream-table join is how='inner' or how='left', not {how!r} (an outer join "
                                 "needs two changing sides: join two tables with table.join(other))")
    if as_of and not isinstance(table, VersionedTable):
        raise ConfigurationError(f"join(as_of=True) reads past values: declare the table with history= "
                                 f"(app.Table({table.name!r}, history=timedelta(days=1)))")
    stream = source if isinstance(source, Stream) else getattr(source, "source", None)
    owner = getattr(stream, "owner", None)
    key_of = None
    if on is not None:
        field, fn = key_function(on)
        if table.is_global:
            key_of = fn
        elif isinstance(source, Stream) and owner is not None:
            label = field if field.isidentifier() else "key"  # a lambda: "<lambda>" is no topic name
            source = source.group_by(on, name=f"{table.name}-join-{label}")
        else:
            raise ConfigurationError(f"join({table.name!r}, on=...) repartitions the stream by the join key: call it "
                                     "on the agent's stream itself, before filter/map (or join a GlobalTable)")
    if owner is not None:
        assert stream is not None  # the owner is the stream's
        topic = getattr(source, "topic", None) or stream.topic
        assert topic is not None  # an agent's stream reads a topic
        detail = ", as of the record's time" if as_of else ""
        declared = JoinDeclared(owner.name, tuple(m.name for m in topic.members), table, how, detail)
        if declared not in owner.app.joins:  # a restarted agent body declares it again
            owner.app.joins.append(declared)
    inner = how == "inner"
    joined = source._derive(_lookups(source, table, key_of, inner=inner, as_of=as_of),  # noqa: SLF001 - a join derives a stream like an operator
                            lambda: _lookups(source._fresh(), table, key_of, inner=inner, as_of=as_of))  # noqa: SLF001 - a join derives a stream like an operator
    joined.mapped = True  # (value, table value) pairs: a group_by after it keeps no topic value type
    return joined


async def _lookups(source: Any, table: "Table", key_of: Callable[[Any], Any] | None, *, inner: bool,
                   as_of: bool) -> AsyncIterator[Any]:
    is_global = table.is_global
    async for value in source:
        event = current_event()
        if event is None:
            raise RuntimeError("stream.join() runs inside an agent, over a topic's records")
        key = key_of(value) if key_of is not None else event.key
        found = _lookup(table, key, event, is_global, as_of)
        if found is _MISSING:
            if inner:
                continue
            found = None
        yield value, found


def _lookup(table: Any, key: Any, event: Any, is_global: bool, as_of: bool) -> Any:
    key_bytes = table.key_codec.encode(key) or b""
    number = table.partition_of(key_bytes)
    if not is_global and number != event.partition >= 0:
        raise JoinNotCopartitioned(
            f"join with table {table.name!r}: key {key!r} of {event.topic}[{event.partition}] lives in table "
            f"partition {number}: the stream and the table are not partitioned alike (the table has "
            f"{table.partitions} partitions; key bytes by the table's key codec {table.key_codec.name!r}); "
            "give both the same key_type/partition count, or join on= to repartition the stream")
    part = table._partition(number, key, False)  # noqa: SLF001 - a lookup reads the table's partition as the table does
    value = table._read(key_bytes, part)  # noqa: SLF001 - a lookup reads the table's partition as the table does
    if value is _MISSING:
        return _MISSING
    if as_of:
        found = table.version_at(value, int(event.timestamp or 0), _MISSING)
        return found
    if type(value) is list and hasattr(table, "version_at"):  # a versioned table: its newest value
        found = value[-1][1] if value else None
        return _MISSING if found is None else found
    return value
