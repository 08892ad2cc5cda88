"""Exactly-once on the in-memory broker: aborts, zombies and rebalances, counted record by record."""
import uuid

import pytest

import streamkit as sk
from streamkit.runtime.transactions import WORKER
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker

PARTITIONS = 4
MODES = ["worker", "partition"]


def build(name, tmp_path, mode, tag="a", **settings):
    """numbers → add to a per-key sum table and emit the input's sequence number to ``seqs``."""
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag), processing_guarantee="exactly_once",
                 transaction_producer=mode, **{"commit_interval": 0.05, **settings})
    numbers = app.topic("numbers", key_type=str, value_type=int, partitions=PARTITIONS)
    seqs = app.topic("seqs", key_type=str, value_type=int, partitions=PARTITIONS)
    sums = app.Table("sums", default=int)
    processed = []

    @app.agent(numbers)
    async def add(stream):
        async for event in stream.events():
            sums[event.key] += event.value
            await seqs.send_soon(key=event.key, value=event.value)
            processed.append(event.value)

    return app, numbers, sums, processed


async def send_inputs(app, numbers, start, stop):
    """From outside the workers (a plain producer): inputs are never part of their transactions."""
    producer = app.driver.producer()
    for i in range(start, stop):
        await producer.send(numbers.name, numbers.key_codec.encode(f"k{i % 10}"), numbers.value_codec.encode(i))
    await producer.flush()


def committed_values(app, topic):
    """What a read_committed reader of ``topic`` sees, in order per partition."""
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    out = []
    for partition, log in enumerate(broker.logs.get(topic, [])):
        tp = TP(topic, partition)
        hidden = broker.control.get(tp, set()) | broker.aborted.get(tp, set())
        stable = broker.stable_offset(tp)
        out.extend(m for m in log[:stable] if m.offset not in hidden)
    return out


def expected_sums(n):
    sums = {}
    for i in range(n):
        sums[f"k{i % 10}"] = sums.get(f"k{i % 10}", 0) + i
    return sums


def check_exact(app, n):
    seqs = sorted(int(m.value) for m in committed_values(app, "seqs"))
    assert seqs == list(range(n)), f"{len(seqs)} outputs for {n} inputs"
    latest = {m.key.decode(): int(m.value) for m in committed_values(app, f"{app.id}-sums-changelog")}
    assert latest == expected_sums(n)


@pytest.mark.parametrize("mode", MODES)
async def test_clean_run_gives_each_output_once_and_exact_sums(tmp_path, mode):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    app, numbers, sums, processed = build(name, tmp_path, mode)
    async with app.running():
        await send_inputs(app, numbers, 0, 2000)
        await wait_for(lambda: len(processed) == 2000, 20)
        await app.runtime.checkpoint.commit()
        assert {k: sums[k] for k in expected_sums(2000)} == expected_sums(2000)
    check_exact(app, 2000)


@pytest.mark.parametrize("mode", MODES)
async def test_abort_mid_checkpoint_hides_output_restores_table_and_reprocesses_once(tmp_path, mode):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    app, numbers, sums, processed = build(name, tmp_path, mode, commit_interval=20)
    async with app.running():
        runtime = app.runtime
        await send_inputs(app, numbers, 0, 100)
        await wait_for(lambda: len(processed) == 100, 10)
        await runtime.checkpoint.commit()  # the first 100 are committed
        await send_inputs(app, numbers, 100, 300)
        await wait_for(lambda: len(processed) == 300, 10)
        victims = list(runtime.txns.units.values())
        originals = [unit.commit_transaction for unit in victims]

        async def broken_commit():
            raise sk.TransactionAborted("injected: broker rejected the commit")

        for unit in victims:
            unit.commit_transaction = broken_commit
        with pytest.raises(sk.TransactionAborted):
            await runtime.checkpoint.commit()
        for unit, original in zip(victims, originals, strict=False):
            unit.commit_transaction = original
        assert runtime.checkpoint.aborts >= 1
        # Nothing of the rolled-back transaction is visible; the table is back at its committed state.
        assert sorted(int(m.value) for m in committed_values(app, "seqs")) == list(range(100))
        assert {k: sums[k] for k in expected_sums(100)} == expected_sums(100)
        # The 200 records come again, once: processed 300 + 200, output 300 exactly. Markers
        # keyed k0..k9 (every partition with inputs) come after them: once they ran, nothing
        # more of the 200 is on its way.
        await wait_for(lambda: len(processed) >= 500, 10)
        await send_inputs(app, numbers, 300, 310)
        await wait_for(lambda: set(range(300, 310)) <= set(processed), 10, message="the markers")
        assert len(processed) == 510, f"{len(processed) - 510} records processed once too often"
        await runtime.checkpoint.commit()
        assert {k: sums[k] for k in expected_sums(310)} == expected_sums(310)
    check_exact(app, 310)


@pytest.mark.parametrize("mode", MODES)
async def test_a_zombie_is_fenced_drops_its_partitions_and_rejoins(tmp_path, mode):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    app, numbers, sums, processed = build(name, tmp_path, mode, commit_interval=20)
    async with app.running():
        runtime = app.runtime
        await send_inputs(app, numbers, 0, 200)
        await wait_for(lambda: len(processed) == 200, 10)
        # A newer instance registers the same transactional id: ours becomes a zombie.
        task = WORKER if mode == "worker" else (PARTITIONS, 1)
        tid = runtime.txns.transactional_id if mode == "worker" else runtime.txns.unit_transactional_id(task)
        successor = app.driver.producer(transactional_id=tid)
        await successor.init_transactions()
        rebalances = runtime.rebalances
        with pytest.raises(sk.TransactionAborted):
            await runtime.checkpoint.commit()
        # It dropped the fenced partitions and rejoined (here it gets them back and recovers).
        await wait_for(lambda: runtime.rebalances > rebalances and runtime.tables.ready, 10)
        await send_inputs(app, numbers, 200, 400)
        await wait_for(lambda: len({*processed}) == 400 and not runtime.router.holding(), 10)
        await runtime.checkpoint.commit()
        assert {k: sums[k] for k in expected_sums(400)} == expected_sums(400)
    check_exact(app, 400)


async def test_a_member_that_missed_a_rebalance_cannot_commit(tmp_path):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    app, numbers, sums, processed = build(name, tmp_path, "worker", commit_interval=20)
    async with app.running():
        runtime = app.runtime
        await send_inputs(app, numbers, 0, 100)
        await wait_for(lambda: len(processed) == 100, 10)
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        broker.generations[app.id] += 1  # the group moved on without us
        with pytest.raises(sk.TransactionAborted, match="generation"):
            await runtime.checkpoint.commit()
        assert committed_values(app, "seqs") == []
        # It rejoined and processes all 100 again, this time for good.
        await wait_for(lambda: len(processed) == 200 and not runtime.router.holding(), 10)
        await runtime.checkpoint.commit()
    check_exact(app, 100)


@pytest.mark.parametrize("mode", MODES)
async def test_rebalance_during_an_open_transaction(tmp_path, mode):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    first, numbers, _, seen_a = build(name, tmp_path, mode, tag="a")
    second, numbers_b, _, seen_b = build(name, tmp_path, mode, tag="b")
    async with first.running():
        await send_inputs(first, numbers, 0, 1000)
        await wait_for(lambda: len(seen_a) > 200, 10)
        async with second.running():  # joins while the first worker's transaction is open
            await wait_for(lambda: second.runtime.assigned and second.runtime.tables.ready, 10)
            await send_inputs(first, numbers, 1000, 2000)
            await wait_for(lambda: len(set(seen_a) | set(seen_b)) == 2000, 20)
        # The second worker left (committing on its way out): the first owns every partition again.
        everything = {TP("numbers", p) for p in range(PARTITIONS)}
        await wait_for(lambda: everything <= first.runtime.assigned and first.runtime.tables.ready, 10,
                       message="the first worker took every partition back")
        await first.runtime.checkpoint.commit()
    check_exact(first, 2000)
