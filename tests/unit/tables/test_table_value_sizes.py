"""A checkpoint keeps every changed key's encoded value until the store has it. orjson (3.12 on)
returns each ``dumps`` result in a ~4 KiB buffer whatever its length: a 3M distinct-key run
held 371 MB of them in one snapshot. The values a table encodes are sized to fit."""
from __future__ import annotations

import tracemalloc
from datetime import timedelta

import pytest

import streamkit as sk

VALUES = 2_000
LIMIT = 512  # bytes a small encoded value may hold, object header included


class Account(sk.Record):
    owner: str
    balance: int


DECLARATIONS = {
    "default (tagged JSON), counters": ({}, lambda i: i),
    "default (tagged JSON), dicts": ({}, lambda i: {"n": i, "tags": {"a", "b"}}),
    "value_type=int": ({"value_type": int}, lambda i: i),
    "value_type=dict": ({"value_type": dict}, lambda i: {"n": i}),
    "value_type=Record": ({"value_type": Account}, lambda i: Account(owner=f"o{i}", balance=i)),
}


def bytes_per_value(encode, make) -> float:
    made = [make(i) for i in range(VALUES)]
    tracemalloc.start()
    try:
        kept = [encode(value) for value in made]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == VALUES
    return held / VALUES


@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_a_tables_encoded_values_are_sized_to_fit(name):
    settings, make = DECLARATIONS[name]
    table = sk.App("sizes").Table("t", default=int, **settings)
    entries = table.entries
    per_value = bytes_per_value(lambda value: entries.encode(None, value), make)
    assert per_value < LIMIT, f"{name}: {per_value:.0f} bytes held per encoded value"
    assert entries.decode_value(entries.encode(None, make(7))) == make(7)


def test_entries_that_carry_their_key_are_sized_to_fit():
    entries = sk.App("sizes").Table("t", default=int).entries
    per_value = bytes_per_value(lambda value: entries.encode((value, "k"), value), lambda i: i)
    assert per_value < LIMIT


def test_a_versioned_tables_values_are_sized_to_fit():
    table = sk.App("sizes").Table("rates", history=timedelta(hours=1))
    codec = table.entries.value_codec
    per_value = bytes_per_value(codec.encode, lambda i: [(1000, i), (2000, i + 1)])
    assert per_value < LIMIT
