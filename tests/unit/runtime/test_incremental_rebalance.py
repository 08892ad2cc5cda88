"""Incremental rebalancing: a worker joining takes only the partitions that move; the others are
never revoked and keep being processed, and exactly-once stays exact. The protocol choice
follows the topology (co-partitioned topics sharing tables need range semantics)."""
from __future__ import annotations

import uuid
from typing import Any

import pytest

import streamkit as sk
from streamkit.errors import ConfigurationError
from streamkit.runtime.rebalancing import choose_protocol
from streamkit.settings import Rebalancing
from streamkit.testing import wait_for
from streamkit.topology import build_topology
from streamkit.transport import TP
from streamkit.transport.base import GroupProtocol
from streamkit.transport.memory import MemoryBroker
from tests.unit.runtime.test_exactly_once_memory import PARTITIONS, build, check_exact, send_inputs


def _connect_revoked(app):
    revoked: list[set[TP]] = []

    async def note(_app, **kwargs):
        revoked.append({tp for tp in kwargs["revoked"] if tp.topic == "numbers"})

    app.on_partitions_revoked.connect(note)
    return revoked


@pytest.mark.parametrize("mode", ["worker", "partition"])
async def test_a_joining_worker_takes_only_what_moves_and_eos_stays_exact(tmp_path, mode):
    name = f"incr-{uuid.uuid4().hex[:6]}"
    first, numbers, _, seen_a = build(name, tmp_path, mode, tag="a")
    second, _, _, seen_b = build(name, tmp_path, mode, tag="b")
    revoked = _connect_revoked(first)
    async with first.running():
        assert first.runtime.group_protocol.protocol is GroupProtocol.CONSUMER
        await send_inputs(first, numbers, 0, 1000)
        await wait_for(lambda: len(seen_a) > 200, 10)
        async with second.running():
            await wait_for(lambda: second.runtime.assigned and second.runtime.tables.ready, 10)
            await send_inputs(first, numbers, 1000, 2000)
            await wait_for(lambda: len(set(seen_a) | set(seen_b)) == 2000, 20)
            kept = {tp for tp in first.runtime.assigned if tp.topic == "numbers"}
            moved = {TP("numbers", p) for p in range(PARTITIONS)} - kept
            assert kept and moved, (kept, moved)
            assert revoked and set().union(*revoked) == moved, \
                f"the first worker gave up {revoked}, but only {sorted(moved)} moved"
        await wait_for(lambda: {TP("numbers", p) for p in range(PARTITIONS)} <= first.runtime.assigned
                       and first.runtime.tables.ready, 10, message="the first worker took every partition back")
        await first.runtime.checkpoint.commit()
    check_exact(first, 2000)


async def test_eager_rebalancing_revokes_every_partition(tmp_path):
    """The contrast that makes the test above able to fail: eager gives up everything."""
    name = f"eager-{uuid.uuid4().hex[:6]}"
    first, numbers, _, seen_a = build(name, tmp_path, "worker", tag="a", rebalancing="eager")
    second, _, _, _ = build(name, tmp_path, "worker", tag="b", rebalancing="eager")
    revoked = _connect_revoked(first)
    async with first.running():
        assert first.runtime.group_protocol.protocol is GroupProtocol.EAGER
        await send_inputs(first, numbers, 0, 100)
        await wait_for(lambda: len(seen_a) == 100, 10)
        async with second.running():
            await wait_for(lambda: second.runtime.assigned and second.runtime.tables.ready, 10)
            assert revoked[0] == {TP("numbers", p) for p in range(PARTITIONS)}


def _topology(*, topics, table=True):
    app = sk.App(f"t-{uuid.uuid4().hex[:6]}", broker="memory://x", driver="memory")
    sources = [app.topic(t, partitions=4) for t in topics]
    if table:
        app.Table("counts", default=int)
    for source in sources:
        @app.agent(source, name=f"read_{source.name}")
        async def read(stream):
            async for _ in stream:
                pass
    return build_topology(app, topics, {t: 4 for t in topics})


def test_protocol_follows_the_topology_and_the_broker():
    one = _topology(topics=["a"])
    two = _topology(topics=["a", "b"])
    stateless_two = _topology(topics=["a", "b"], table=False)
    auto, incremental, eager = Rebalancing.AUTO, Rebalancing.INCREMENTAL, Rebalancing.EAGER
    assert choose_protocol(auto, "confluent", two, True).protocol is GroupProtocol.CONSUMER
    assert choose_protocol(auto, "confluent", one, False).protocol is GroupProtocol.COOPERATIVE
    assert choose_protocol(auto, "confluent", stateless_two, False).protocol is GroupProtocol.COOPERATIVE
    shared = choose_protocol(auto, "confluent", two, False)
    assert shared.protocol is GroupProtocol.EAGER and "a, b" in shared.reason
    with pytest.raises(ConfigurationError, match="a, b feed the same tables"):
        choose_protocol(incremental, "confluent", two, False)
    assert choose_protocol(eager, "confluent", one, True).protocol is GroupProtocol.EAGER
    assert choose_protocol(auto, "aiokafka", one, True).protocol is GroupProtocol.EAGER


def test_settings_refuse_what_would_be_ignored():
    with pytest.raises(ConfigurationError, match="needs driver='confluent'"):
        sk.App("x", broker="kafka://127.0.0.1:1", rebalancing="incremental")
    with pytest.raises(ConfigurationError, match="partition.assignment.strategy.*rebalancing="):
        sk.App("x", broker="kafka://127.0.0.1:1", driver="confluent",
               consumer_config={"partition.assignment.strategy": "roundrobin"})
    with pytest.raises(ConfigurationError, match="rebalancing='sometimes'"):
        sk.App("x", broker="kafka://127.0.0.1:1", rebalancing="sometimes")


async def test_a_fenced_member_whose_partitions_come_straight_back_rereads_the_aborted_records(tmp_path):
    """Under an incremental protocol the rejoin after a fence may give the member its partitions
    back without resetting their positions (librdkafka skipped a rejoin asked for during a
    rebalance): the worker must still go back to the last committed offsets, or the records of
    the aborted transaction are never processed again (found on Apache Kafka: missing=311)."""
    name = f"fence-{uuid.uuid4().hex[:6]}"
    app, numbers, _, processed = build(name, tmp_path, "worker", commit_interval=20)
    async with app.running():
        runtime = app.runtime
        consumer = runtime.consumer
        consumer.rejoin = lambda: setattr(consumer, "_needs_join", True)  # partitions stay, positions kept
        await send_inputs(app, numbers, 0, 100)
        await wait_for(lambda: len(processed) == 100, 10)
        MemoryBroker.named(app.conf.bootstrap_servers).generations[app.id] += 1  # the group moved on
        with pytest.raises(sk.TransactionAborted, match="generation"):
            await runtime.checkpoint.commit()
        await send_inputs(app, numbers, 100, 150)
        await wait_for(lambda: set(range(150)) <= set(processed) and runtime.tasks.running
                       and not runtime.router.holding(), 10, message="everything processed after the fence")
        await runtime.checkpoint.commit()
    check_exact(app, 150)


def test_standby_replicas_keep_a_predictable_failover_unless_incremental_is_asked_for():
    """Standbys sit where range moves a partition when its owner leaves; cooperative-sticky and
    KIP-848 decide that elsewhere, so ``auto`` with standbys keeps range (and says why)."""
    one = _topology(topics=["a"])
    stateless = _topology(topics=["a"], table=False)
    auto, incremental = Rebalancing.AUTO, Rebalancing.INCREMENTAL
    for kip848 in (True, False):
        warm = choose_protocol(auto, "confluent", one, kip848, standbys=1)
        assert warm.protocol is GroupProtocol.EAGER and warm.range_failover
        assert "table_standby_replicas=1" in warm.reason and "rebalancing='incremental'" in warm.reason
        asked = choose_protocol(incremental, "confluent", one, kip848, standbys=1)
        assert asked.protocol.incremental and not asked.range_failover
    assert choose_protocol(auto, "confluent", stateless, False, standbys=1).protocol is GroupProtocol.COOPERATIVE
    assert choose_protocol(auto, "aiokafka", one, False, standbys=1).range_failover
    assert choose_protocol(auto, "memory", one, False, standbys=1).range_failover


async def test_a_member_revoking_in_an_incremental_rebalance_commits_in_the_new_generation():
    """The in-memory broker as Kafka's incremental protocols: a member commits (exactly-once:
    offsets in its transaction, fenced by the group generation) while it gives partitions up,
    and that commit is valid. The broker used to bump the group's generation before telling
    the members, so a checkpoint in that window was fenced and the member dropped everything
    (a flaky test_a_joining_worker_takes_only_what_moves_and_eos_stays_exact)."""
    from streamkit.errors import GroupFenced
    from streamkit.transport.memory import MemoryConsumer, MemoryProducer

    broker = MemoryBroker.named(f"gen-{uuid.uuid4().hex[:6]}")
    broker.create_topic("t", 4)
    producer = MemoryProducer(broker, "txn-first")
    await producer.init_transactions()
    first = MemoryConsumer(broker, "g", protocol=GroupProtocol.CONSUMER)
    commits: list[Any] = []

    async def nothing(_tps):
        pass

    async def commit_on_revoke(tps):
        await producer.begin_transaction()
        try:
            await producer.send_offsets_to_transaction({tp: 0 for tp in tps}, first.group_metadata())
            commits.append(sorted(tp.partition for tp in tps))
        except GroupFenced as exc:
            commits.append(exc)
        await producer.abort_transaction()

    first.subscribe(["t"], nothing, commit_on_revoke)
    await first.getmany(0, 10)
    second = MemoryConsumer(broker, "g", protocol=GroupProtocol.CONSUMER)
    second.subscribe(["t"], nothing, nothing)
    await second.getmany(0, 10)  # joins: the first member gives up half, committing as it does
    assert commits == [[2, 3]]
    assert first.group_metadata() == ("g", broker.generations["g"]) == second.group_metadata()
