"""Table values keep their Python type through the store, the changelog and recovery.

The apps here are written as Faust users write them (``app.Table(name, default=set)``, no
value_type, default commit interval and store); the memory driver stands in for the broker.
"""
from __future__ import annotations

import dataclasses
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

import streamkit as sk
from streamkit.testing import wait_for


class Address(sk.Record):
    city: str
    zip: str = ""


class Customer(sk.Record):
    name: str
    address: Address
    since: datetime
    tags: list[str] = dataclasses.field(default_factory=list)


VALUES = {
    "a set": {"x", "y"},
    "a frozenset": frozenset({1, 2}),
    "a tuple": ("a", 1, (2.5, None)),
    "a record": Customer("ann", Address("Oslo", "0150"), datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), ["vip"]),
    "a datetime": datetime(2026, 5, 6, 7, 8, 9, 123000),
    "a date": date(2026, 5, 6),
    "a duration": timedelta(seconds=90),
    "a decimal": Decimal("12.340"),
    "bytes": b"\x00\xff",
    "a uuid": uuid.UUID(int=7),
    "nested": {"ids": {3, 4}, "pair": ("p", 2), "when": [datetime(2020, 1, 1)]},
    "a dict with int keys": {1: "one", 2: "two"},
    "a dict that looks tagged": {"__sk__": "set", "v": [1]},
    "plain json": {"n": 1, "l": [1, "two", None, True, 1.5]},
}


def build(name: str, tmp_path, tag: str = "a"):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                 data_dir=str(tmp_path / tag))
    tags = app.topic("tags")
    seen = app.Table("seen", default=set)
    anything = app.Table("anything")
    done: list[str] = []

    @app.agent(tags)
    async def collect(stream):
        async for event in stream.events():
            if event.value.get("store"):
                name = event.value["store"]
                anything[name] = VALUES[name]
            else:
                seen[event.key].add(event.value["tag"])
            done.append(event.key)

    return app, tags, seen, anything, done


async def test_a_set_default_stays_a_set_after_a_checkpoint(tmp_path):
    app, tags, seen, _, done = build(f"sets-{uuid.uuid4().hex[:6]}", tmp_path)
    async with app.running():
        await tags.send(key="u1", value={"tag": "a"})
        await wait_for(lambda: len(done) == 1, 10)
        assert seen["u1"] == {"a"}, "table[key].add on a missing key must store the default (Faust)"
        await app.runtime.checkpoint.commit()  # the value now comes from the store
        await tags.send(key="u1", value={"tag": "b"})
        await wait_for(lambda: len(done) == 2, 10)
        assert app.runtime.errors.counts["dlq"] == 0
        assert seen["u1"] == {"a", "b"} and type(seen["u1"]) is set
        await app.runtime.checkpoint.commit()
        await tags.send(key="u1", value={"tag": "c"})  # an in-place change of a stored value
        await wait_for(lambda: len(done) == 3, 10)
        await app.runtime.checkpoint.commit()
        assert seen["u1"] == {"a", "b", "c"}


async def test_every_value_type_survives_store_changelog_and_recovery(tmp_path):
    name = f"types-{uuid.uuid4().hex[:6]}"
    app, tags, _, anything, done = build(name, tmp_path, "a")
    async with app.running():
        for _i, key in enumerate(VALUES):
            await tags.send(key=key, value={"store": key})
        await wait_for(lambda: len(done) == len(VALUES), 10)
        await app.runtime.checkpoint.commit()
        from_store = {key: anything[key] for key in VALUES}
    again, _, _, anything2, _ = build(name, tmp_path, "b")  # an empty data dir: recovery from the changelog
    async with again.running():
        await wait_for(lambda: again.runtime.tables.ready and len(anything2) == len(VALUES), 10)
        recovered = dict(anything2.items())
    for key, value in VALUES.items():
        assert from_store[key] == value and type(from_store[key]) is type(value), (key, from_store[key])
        assert recovered[key] == value and type(recovered[key]) is type(value), (key, recovered[key])


# -- the encoding itself, over generated values ---------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from streamkit.codecs import KeyCodec  # noqa: E402
from streamkit.tables.values import TableEntries, TypedJsonCodec  # noqa: E402

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8), st.binary(max_size=8),
    st.datetimes(timezones=st.one_of(st.none(), st.just(timezone.utc))), st.dates(), st.timedeltas(),
    st.decimals(allow_nan=False, allow_infinity=False), st.uuids())
_hashable = st.recursive(_scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
                         max_leaves=6)
_records = st.builds(Customer, name=st.text(max_size=5), address=st.builds(Address, city=st.text(max_size=5)),
                     since=st.datetimes(timezones=st.just(timezone.utc)), tags=st.lists(st.text(max_size=3), max_size=2))
_values = st.recursive(
    st.one_of(_scalars, _records),
    lambda inner: st.lists(inner, max_size=3) | st.sets(_hashable, max_size=3) | st.frozensets(_hashable, max_size=3)
    | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    | st.dictionaries(_hashable, inner, max_size=3),
    max_leaves=10)
_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # keys are encoded by the topics' key codec (JSON)
_keys = st.one_of(st.text(min_size=1, max_size=6), _int64, st.tuples(st.text(max_size=3), _int64))


def _same(a, b) -> bool:
    """Equal and of the same type all the way down (1 == 1.0 == True would hide a lost type)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return a == b


@settings(max_examples=300, deadline=None)
@given(key=_keys, value=_values)
def test_entries_round_trip_key_and_value_types(key, value):
    key_codec = KeyCodec()
    entries = TableEntries(key_codec, TypedJsonCodec(), key_declared=False)
    key_bytes = key_codec.encode(key)
    raw = entries.encode(key if entries.carries_key(key) else None, value)
    if value is None:
        assert raw is None  # a tombstone: the key is deleted
        return
    got_key, got_value = entries.decode(key_bytes, raw)
    assert _same(got_key, key), (key, got_key)
    assert _same(got_value, value), (value, got_value)
    assert _same(entries.decode_value(raw), value)


def test_a_value_no_encoding_covers_is_refused_with_the_way_out():
    with pytest.raises(TypeError, match="declare value_type="):
        TypedJsonCodec().encode(object())


async def test_an_unstorable_value_fails_its_record_not_the_checkpoint(tmp_path):
    name = f"bad-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(tmp_path))
    events = app.topic("events")
    latest = app.Table("latest")
    done: list[str] = []

    @app.agent(events)
    async def keep(stream):
        async for event in stream.events():
            latest[event.key] = object() if event.value == "bad" else {"v": event.value}
            done.append(event.key)

    async with app.running():
        await events.send(key="a", value="bad")
        await events.send(key="b", value="good")
        await wait_for(lambda: done == ["b"] and app.runtime.errors.counts["dlq"] == 1, 10)
        await app.runtime.checkpoint.commit()
        assert latest["b"] == {"v": "good"} and "a" not in latest


# -- generated keys and values through a running app: the store, the changelog and recovery -------

import asyncio  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import HealthCheck  # noqa: E402


async def _through_an_app(pairs: list[tuple], base: Path) -> dict[str, dict[bytes, tuple]]:
    """Writes each (key, value) from a record keyed like it, checkpoints, then reads the table
    back three ways: from the worker's store, after a restart on its data dir (the local store),
    and after a start on an empty data dir (recovered from the changelog)."""
    name = f"prop-{uuid.uuid4().hex[:6]}"
    codec = KeyCodec()

    def build(tag: str):
        app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(base / tag))
        items = app.topic("items", value_type=int)
        table = app.Table("anything")
        done: list[int] = []

        @app.agent(items)
        async def keep(stream):
            async for i in stream:
                table[pairs[i][0]] = pairs[i][1]
                done.append(i)

        return app, items, table, done

    def read(app, table) -> dict[bytes, tuple]:
        return {codec.encode(k): (k, v) for k, v in table.items()}

    out: dict[str, dict[bytes, tuple]] = {}
    app, items, table, done = build("a")
    async with app.running():
        for i, (key, _) in enumerate(pairs):
            await items.send(key=key, value=i)  # the record's key places it where the table key lives
        await wait_for(lambda: len(done) == len(pairs), 10, message="every pair written")
        await app.runtime.checkpoint.commit()  # from here on the values come from the store
        out["store"] = read(app, table)
    for tag, where in (("a", "local store"), ("b", "changelog")):
        again, _, table2, _ = build(tag)
        async with again.running():
            await wait_for(lambda: again.runtime.tables is not None and again.runtime.tables.ready  # noqa: B023 - called within this same iteration
                           and len(table2.local) == table.partitions, 10, message=f"restored from the {where}")  # noqa: B023 - called within this same iteration
            out[where] = read(again, table2)
    return out


def _dedupe(entries: list[tuple]) -> list[tuple]:
    """One pair per key as the table stores it (``1`` and ``"1"`` are the same key bytes)."""
    codec = KeyCodec()
    return list({codec.encode(k): (k, v) for k, v in entries}.values())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(st.tuples(_keys, _values.filter(lambda v: v is not None)), min_size=1, max_size=6)
       .map(_dedupe))
def test_generated_keys_and_values_survive_store_changelog_and_recovery(entries):
    with tempfile.TemporaryDirectory() as base:
        seen = asyncio.run(_through_an_app(entries, Path(base)))
    expected = {KeyCodec().encode(k): (k, v) for k, v in entries}
    for where, got in seen.items():
        assert got.keys() == expected.keys(), (where, sorted(got), sorted(expected))
        for key_bytes, (key, value) in expected.items():
            got_key, got_value = got[key_bytes]
            assert _same(got_key, key), (where, key, got_key)
            assert _same(got_value, value), (where, value, got_value)


async def test_keys_equal_in_python_but_not_in_json_stay_apart_one_after_the_other():
    """1, True and 1.0 are one dict key in Python but three table keys (JSON bytes, as in Faust);
    placing the same key repeatedly is remembered, so the next key of another type must not
    borrow the last one's place."""
    app = sk.App(f"equal-keys-{uuid.uuid4().hex[:6]}")
    table = app.Table("things")

    @app.agent(app.topic("things-in"))
    async def store(stream):
        async for _value in stream:
            table[1] = "int"
            table[True] = "bool"
            table[1.0] = "float"
            yield [table[1], table[True], table[1.0], sorted(table.keys(), key=repr)]

    async with store.test_context() as agent:
        event = await agent.put("go")
        assert agent.results[event.message.offset] == ["int", "bool", "float", [1, 1.0, True]]
