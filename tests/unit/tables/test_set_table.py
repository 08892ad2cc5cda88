"""Faust's ``app.SetTable(name, value_type=str)``: ``value_type`` is the type of the elements; the
values stay sets across checkpoints, stored as JSON lists of their elements."""
from __future__ import annotations

import uuid

import orjson
import pytest

import streamkit as faust
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def memory_app(**settings):
    name = f"set-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     agent_retries=0, **settings)


async def test_a_set_table_of_str_keeps_sets_across_checkpoints():
    app = memory_app()
    people = app.SetTable("people", value_type=str)
    joining = app.topic("joining", key_type=str, value_type=str)
    seen = []

    @app.agent(joining)
    async def join(stream):
        async for location, name in stream.items():
            people[location].add(name)
            seen.append(set(people[location]))

    async with app.running():
        await joining.send(key="oslo", value="bob")
        await wait_for(lambda: len(seen) == 1, 10, message="bob joined")
        await app.runtime.checkpoint.commit()  # the set leaves the cache for the store
        await joining.send(key="oslo", value="alice")
        await wait_for(lambda: len(seen) == 2, 10, message="alice joined")
        await app.runtime.checkpoint.commit()
        assert seen == [{"bob"}, {"alice", "bob"}]
        assert app.runtime.errors.counts == {"dlq": 0, "skip": 0}
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        changelog = [orjson.loads(m.value) for part in broker.logs[people.changelog.name] for m in part
                     if m.key == b"oslo"]  # (checkpoint marks besides: tables/marks.py)
        assert changelog == [["bob"], ["alice", "bob"]]  # the elements, sorted


def test_elements_are_checked_against_the_declared_type_and_values_must_be_sets():
    app = memory_app()
    counts = app.SetTable("counts", value_type=int)
    assert counts.value_codec.decode(b"[3,1]") == {1, 3}
    with pytest.raises(faust.DecodeError):
        counts.value_codec.decode(b'["one"]')
    with pytest.raises(TypeError, match="values are sets"):
        counts.value_codec.encode([1, 2])
    assert app.SetGlobalTable("everywhere", value_type=str).value_codec.decode(b'["a"]') == {"a"}
