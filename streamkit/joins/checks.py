"""Co-partitioning of joins, checked once at worker start (before any changelog is created).

A join meets the two sides of one key in one task: both streams of a windowed join, a stream
and the (non-global) table it looks up, the two tables of a table-table join, must have the
same partition count (and their keys the same bytes, which the worker checks per record). A
mismatch is a startup error that names the topics, the counts and the fix.
"""
from __future__ import annotations

from typing import Any, Iterable

from ..errors import ConfigurationError


def join_problems(joins: Iterable[Any], counts: dict[str, int]) -> list[str]:
    """What is wrong with ``joins`` given each topic's partition count (``counts``)."""
    problems = []
    for join in joins:
        table = join.table
        sides = {name: counts.get(name) for name in join.streams}
        known = {n: c for n, c in sides.items() if c}
        if len(set(known.values())) > 1:
            listed = ", ".join(f"{name!r} has {count}" for name, count in known.items())
            most = max(known.values())
            problems.append(f"{join.describe()}: its topics must have one partition count to meet each key's records "
                            f"in one task, but {listed}; repartition one side to {most} partitions (an agent "
                            f"forwarding it with stream.group_by(key, partitions={most}) or through() to a topic "
                            f"with {most} partitions) and join that topic instead")
            continue
        if table.is_global or table.declared_partitions is None or not known:
            continue
        count = next(iter(known.values()))
        if table.declared_partitions != count:
            problems.append(f"{join.describe()}: table {table.name!r} declares {table.declared_partitions} "
                            f"partitions but {', '.join(known)} has {count}: a key's table partition must be the "
                            f"record's own; declare partitions={count} on the table (or leave it out), or join "
                            "on= to repartition the stream")
    return problems


def check_table_joins(joins: Iterable[Any]) -> None:
    """After every table's count is settled: the two sides of each table-table join agree."""
    problems = []
    for join in joins:
        left = getattr(join, "left", None)
        if left is None or not hasattr(left, "partitions") or join.streams:
            continue
        right = join.right  # a table-table join has both sides
        if left.partitions != right.partitions:
            problems.append(f"{join.describe()}: {left.name!r} has {left.partitions} partitions and {right.name!r} "
                            f"{right.partitions}; declare the same partitions= on both (a table has the count of "
                            "the topic whose records write it)")
    if problems:
        raise ConfigurationError("; ".join(problems))


def check_joins(joins: Iterable[Any], counts: dict[str, int]) -> None:
    problems = join_problems(joins, counts)
    if problems:
        raise ConfigurationError("; ".join(problems))
