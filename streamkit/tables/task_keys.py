"""Keys written from a record of another partition than the one they hash to.

Faust's windowing examples count ``table['counter']`` from every partition's records. Faust and
Kafka Streams both let a task write any key to its own store: the entry lives in the record's
partition (its shard, its changelog partition, restored there), and reads in that task see it.
streamkit does the same by default (``key_partitioning="task"``) and warns once per table, as
such a key is not where web routing by key (``table_route``) or a read outside a record looks.
``key_partitioning="strict"`` refuses those writes with ``WrongPartition`` instead.
"""
from __future__ import annotations

import logging
from typing import Any, Protocol

from ..errors import ConfigurationError, NoRetry, StreamkitError

log = logging.getLogger("streamkit.tables")

KEY_PARTITIONING = ("task", "strict")


class KeyedTable(Protocol):
    """What ``task_partition`` reads of a Table (table.py, which imports this module)."""

    warned_task_keys: bool

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> int: ...

    @property
    def key_partitioning(self) -> str: ...


class WrongPartition(StreamkitError, NoRetry):
    """An agent wrote a key that belongs to another partition than the record it processes,
    to a table declared ``key_partitioning="strict"`` (every attempt would: not retried)."""


def check_key_partitioning(name: str, value: str) -> str:
    """``value`` if it is a known mode; else a ConfigurationError saying what each one does."""
    if value not in KEY_PARTITIONING:
        raise ConfigurationError(
            f"table {name!r}: key_partitioning={value!r}: use 'task' (the default, as Faust and Kafka Streams: a key "
            "written from a record of another partition lives in that record's partition) or 'strict' (such a "
            "write raises WrongPartition)")
    return value


def task_partition(table: KeyedTable, number: int, key: Any, event: Any, writing: bool) -> int:
    """The partition a read or write of ``key`` (whose own partition is ``number``) uses inside
    the record ``event`` of partition ``event.partition != number``."""
    partition = event.partition
    if table.key_partitioning == "strict" or partition >= table.partitions:
        if not writing:
            return number
        if partition >= table.partitions:
            why = (f"the record being processed came from {event.topic}[{partition}] and the table has only "
                   f"{table.partitions} partitions")
        else:
            why = (f"the record being processed came from {event.topic}[{partition}] and the table is declared "
                   "key_partitioning='strict'")
        raise WrongPartition(f"table {table.name!r}: key {key!r} belongs to partition {number}, but {why}; re-key "
                             "the stream first (stream.group_by) so the table is co-partitioned with its source")
    if writing and not table.warned_task_keys:
        table.warned_task_keys = True
        log.warning("table %r: key %r was written while processing %s[%d]: it is kept in table partition %d (the "
                    "record's task, as Faust and Kafka Streams do), not in the partition its key hashes to (%d). "
                    "Reads in that task see it; web routing by key (table_route) and reads outside a record look "
                    "in partition %d. Re-key the stream with group_by to keep each key in its own partition, or "
                    "declare key_partitioning='strict' to refuse such writes (said once per table)",
                    table.name, key, event.topic, partition, partition, number, number)
    return partition
