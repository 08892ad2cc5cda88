# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""The table's dict-API fast paths (a remembered placement, a value in the write cache) must
behave as the general path: every check a write makes, every place a read looks."""
import uuid

import pytest

import streamkit as sk
from streamkit.runtime.event import Event, processing
from streamkit.tables.table import PartitionNotLocal
from streamkit.tables.task_keys import WrongPartition
from streamkit.transport.base import Message


def table(**options):
    app = sk.App(f"fast-{uuid.uuid4().hex[:6]}", broker="memory://fast", driver="memory", web_enabled=False)
    counts = app.Table("counts", partitions=4, **options)
    counts.serve_in_memory()
    return counts


def processing_record_of(counts, key, partition=None):
    """Set the record being processed: one of ``key``'s own partition unless told."""
    number = counts.key_partition(key) if partition is None else partition
    processing.set(Event(key, None, Message("src", number, 0, None, None, [], 0)))


@pytest.fixture(autouse=True)
def no_record_after():
    yield
    processing.set(None)


def test_a_write_to_a_key_just_read_still_checks_the_records_partition():
    counts = table(default=int, key_partitioning="strict")
    other = (counts.key_partition("k") + 1) % 4
    processing_record_of(counts, "k", partition=other)
    assert counts.get("k") is None  # placed (remembered) by the read
    with pytest.raises(WrongPartition, match="belongs to partition"):
        counts["k"] = 5
    with pytest.raises(WrongPartition, match="belongs to partition"):
        counts["k"] += 1  # the read's default is a write too


def test_increments_and_reads_of_one_key_inside_its_record():
    counts = table(default=int)
    processing_record_of(counts, "k")
    for _ in range(3):
        counts["k"] += 1
    assert counts["k"] == 3 and dict(counts.items()) == {"k": 3}


def test_an_int_key_written_right_after_its_read_iterates_back_as_an_int():
    counts = table(default=int)  # no key_type: the entry carries a non-str key
    processing_record_of(counts, 5)
    counts[5] += 1
    counts[5] += 1
    assert dict(counts.items()) == {5: 2}


def test_a_value_that_cannot_be_encoded_fails_its_write_even_for_a_key_just_read():
    counts = table(default=list)
    processing_record_of(counts, "k")
    assert counts["k"] == []
    with pytest.raises(TypeError):
        counts["k"] = object()


def test_bool_and_int_keys_are_placed_apart():
    counts = table()
    processing_record_of(counts, 1)
    counts[1] = "one"
    processing_record_of(counts, True)
    counts[True] = "true"
    processing.set(None)  # read where each key lives (inside a record: that record's partition)
    assert counts[1] == "one" and counts[True] == "true"


def test_a_key_read_after_its_partition_stopped_being_ready_is_refused():
    counts = table(default=int)
    processing_record_of(counts, "k")
    counts["k"] += 1
    counts.local[counts.key_partition("k")].ready = False  # recovering again (a rebalance)
    with pytest.raises(PartitionNotLocal, match="is recovering"):
        counts["k"]
    with pytest.raises(PartitionNotLocal, match="is recovering"):
        counts["k"] = 2


def test_a_deleted_key_read_again_gets_its_default():
    counts = table(default=int)
    processing_record_of(counts, "k")
    counts["k"] += 7
    del counts["k"]
    assert "k" not in counts and counts["k"] == 0


def test_a_new_partition_count_places_remembered_keys_again():
    counts = table(default=int)
    processing_record_of(counts, "user-3")
    counts["user-3"] += 1
    old = counts.key_partition("user-3")
    counts.partitions = 16  # as resolve_partitions settles it at the worker's start
    counts.local = {}
    counts.serve_in_memory()
    number = counts.key_partition("user-3")
    assert number != old  # 3 of 4, 11 of 16: a stale placement would write elsewhere
    processing_record_of(counts, "user-3")
    counts["user-3"] += 1
    assert counts.local[number].cache[b"user-3"] == 1  # a fresh store: the write went to its new place


def test_a_table_places_keys_as_the_partitioner_does_without_filling_its_memo():
    """The table remembers placements itself; the partitioner's memo (for producers) is not
    filled a second time by every new table key."""
    from streamkit.transport import partitioner

    counts = table(default=int)
    keys = [f"user-{i}" for i in range(500)]
    partitioner._known.pop(4, None)
    placed = [counts.key_partition(key) for key in keys]
    assert not partitioner._known.get(4)
    assert placed == [partitioner.partition_for_key(key.encode(), 4) for key in keys]
