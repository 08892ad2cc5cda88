"""Incremental rebalancing on a broker (confluent driver: cooperative-sticky on the dev broker,
KIP-848 on Apache Kafka 4.x): a second worker joining revokes only what moves from the first,
and exactly-once outputs and table stay exact through it."""
from __future__ import annotations

import asyncio

import pytest

import streamkit as sk
from streamkit.testing import read_topic, wait_for
from streamkit.testing.pytest_plugin import TEST_CONSUMER_SETTINGS
from streamkit.transport import TP

PARTITIONS = 4


def build(name, broker_address, tmp_path, tag, **settings):
    """As a Faust user writes it: a count table without partitions=, an output per input."""
    app = sk.App(name, broker=broker_address, driver="confluent", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag), commit_interval=0.2, **{**TEST_CONSUMER_SETTINGS, **settings})
    words = app.topic(f"{name}-words", key_type=str, value_type=int, partitions=PARTITIONS)
    seqs = app.topic(f"{name}-seqs", key_type=str, value_type=int, partitions=PARTITIONS)
    counts = app.Table("counts", default=int)
    seen: list[int] = []

    @app.agent(words)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1
            await seqs.send_soon(key=event.key, value=event.value)
            seen.append(event.value)

    revoked: list[set[TP]] = []

    async def note(_app, **kwargs):
        revoked.append({tp for tp in kwargs["revoked"] if tp.topic == words.name})

    app.on_partitions_revoked.connect(note)
    return app, words, seqs, seen, revoked


async def send(app, topic, start, stop):
    for i in range(start, stop):
        await topic.send(key=f"w{i % 20}", value=i)
    await app.flush()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_joining_worker_takes_only_what_moves(broker_address, unique, tmp_path, guarantee):
    name = f"incr-{unique}"
    first, words, seqs, seen_a, revoked = build(name, broker_address, tmp_path, "a", processing_guarantee=guarantee)
    second, _, _, seen_b, _ = build(name, broker_address, tmp_path, "b", processing_guarantee=guarantee)
    everything = {TP(words.name, p) for p in range(PARTITIONS)}
    async with first.running():
        assert first.runtime.group_protocol.protocol.incremental, first.runtime.group_protocol.describe()
        await wait_for(lambda: everything <= first.runtime.assigned, 30, message="the first worker owns all")
        await send(first, words, 0, 500)
        await wait_for(lambda: len(seen_a) >= 500, 30, message="the first 500 processed")
        async with second.running():
            await wait_for(lambda: any(tp.topic == words.name for tp in second.runtime.assigned)
                           and second.runtime.tables.ready, 60, message="the second worker got partitions")
            await send(first, words, 500, 1000)
            await wait_for(lambda: set(range(1000)) <= set(seen_a) | set(seen_b), 60, message="1000 processed")
            isolation = "read_committed" if guarantee == "exactly_once" else "read_uncommitted"
            # processed is not done (a rolled-back transaction's records come again): wait for outputs
            await asyncio.to_thread(read_topic, broker_address, seqs.name, expect=1000, timeout=60,
                                    isolation=isolation)
            kept = {tp for tp in first.runtime.assigned if tp.topic == words.name}
            moved = everything - kept
            # A balancing assignor splits four inputs two and two (an extra leader partition
            # counted beside them made it 1 and 3), and exactly one of the two leads.
            assert len(kept) == 2 and len(moved) == 2, (kept, moved)
            assert all(tp.topic == words.name for tp in first.runtime.assigned | second.runtime.assigned)
            assert [first.runtime.is_leader, second.runtime.is_leader].count(True) == 1
            assert set().union(*revoked) == moved, \
                f"the first worker gave up {revoked}, but only {sorted(moved)} moved"
    outputs = await asyncio.to_thread(read_topic, broker_address, seqs.name, isolation=isolation, idle=3.0)
    values = sorted(int(m.value()) for m in outputs)
    assert set(values) == set(range(1000)), f"{len(set(range(1000)) - set(values))} inputs without output"
    if guarantee == "exactly_once":
        assert values == list(range(1000)), f"{len(values) - 1000} duplicated outputs"
