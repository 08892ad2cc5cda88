"""``agent.test_context()`` beyond the guide's examples: what the agent yields reaches its sinks
(mockable, as in Faust), ``group_by``/``through`` re-key in process, and a re-keying that fails
is raised by ``put``."""
from __future__ import annotations

from unittest.mock import AsyncMock

import pytest

import streamkit as faust
from streamkit.transport.partitioner import partition_for_key


class Move(faust.Record):
    user: str
    to: str


async def test_yields_reach_topics_agents_and_callables_given_as_sinks(monkeypatch):
    app = faust.App("ctx-sinks")  # no broker is contacted
    out = app.topic("out", value_type=str)
    called, awaited = [], []

    @app.agent()
    async def audit(stream):
        async for _value in stream:
            pass

    async def remember(value):
        awaited.append(value)

    @app.agent(app.topic("in", value_type=str), sink=[out, audit, called.append, remember])
    async def shout(stream):
        async for word in stream:
            yield word.upper()

    out_send, audit_send = AsyncMock(), AsyncMock()
    monkeypatch.setattr(out, "send", out_send)
    monkeypatch.setattr(audit, "send", audit_send)
    async with shout.test_context() as agent:
        await agent.put("hi", key="k")
        await agent.put("there")
    assert called == awaited == ["HI", "THERE"]
    for send in (out_send, audit_send):
        assert [c.kwargs for c in send.await_args_list] == [{"key": "k", "value": "HI"}, {"value": "THERE"}]


async def test_group_by_and_through_rekey_in_process_and_tables_follow_the_new_key():
    app = faust.App("ctx-regroup", topic_partitions=8)
    moves = app.topic("moves", key_type=str, value_type=Move)
    where = app.Table("where", default=str)
    seen = []

    @app.agent(moves)
    async def track(stream):
        async for event in stream.group_by(lambda m: m.user, name="user").through("moves-by-user").events():
            where[event.key] = event.value.to
            seen.append((event.key, event.partition, event.offset))
            yield event.value.to

    async with track.test_context() as agent:
        # every move under one key: only the re-keying puts each user's writes in its partition
        first = await agent.put(Move(user="ann", to="oslo"), key="all")
        await agent.put(Move(user="bob", to="rome"), key="all")
        await agent.put(Move(user="ann", to="lima"), key="all")
        assert (where["ann"], where["bob"]) == ("lima", "rome")
        assert agent.results[first.message.offset] == "oslo"
    # each under its user, in the user's partition, with the offset it was put at
    assert seen == [(user, partition_for_key(user.encode(), 8), offset)
                    for offset, user in enumerate(("ann", "bob", "ann"))]


async def test_a_group_by_key_that_fails_is_raised_by_put():
    app = faust.App("ctx-regroup-fails")

    @app.agent(app.topic("numbers", value_type=int))
    async def by_inverse(stream):
        async for n in stream.group_by(lambda n: 1 / n, name="inverse"):
            yield n

    async with by_inverse.test_context() as agent:
        await agent.put(2, key="a")
        with pytest.raises(ZeroDivisionError):
            await agent.put(0, key="a")
