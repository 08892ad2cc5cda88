"""Kafka transaction semantics of the in-memory broker (the base of exactly-once tests)."""
import uuid

import pytest

from streamkit import Settings
from streamkit.errors import ProducerFenced
from streamkit.transport import TP, create_driver
from streamkit.transport.memory import MemoryBroker


def driver():
    return create_driver(Settings(broker=f"memory://txn-{uuid.uuid4().hex[:6]}", driver="memory"))


async def read(drv, tp, isolation):
    consumer = drv.consumer(None, isolation_level=isolation)
    await consumer.assign([tp], {tp: 0})
    batches = await consumer.getmany(0, 1000)
    ends = await consumer.end_offsets([tp])
    return [m.value for m in batches.get(tp, [])], ends[tp]


async def test_commit_abort_markers_and_isolation():
    drv = driver()
    tp = TP("t", 0)
    producer = drv.producer(transactional_id="app-0")
    await producer.init_transactions()
    await producer.begin_transaction()
    await producer.send("t", None, b"aborted", partition=0)
    await producer.abort_transaction()
    await producer.begin_transaction()
    await producer.send("t", None, b"committed", partition=0)
    await producer.commit_transaction()
    assert await read(drv, tp, "read_committed") == ([b"committed"], 4)  # 2 records + 2 markers
    assert (await read(drv, tp, "read_uncommitted"))[0] == [b"aborted", b"committed"]


async def test_read_committed_stops_at_the_last_stable_offset():
    drv = driver()
    tp = TP("t", 0)
    plain = drv.producer()
    txn = drv.producer(transactional_id="app-1")
    await txn.init_transactions()
    await plain.send("t", None, b"before", partition=0)
    await txn.begin_transaction()
    await txn.send("t", None, b"open", partition=0)
    await plain.send("t", None, b"after", partition=0)
    assert await read(drv, tp, "read_committed") == ([b"before"], 1)
    await txn.commit_transaction()
    assert (await read(drv, tp, "read_committed"))[0] == [b"before", b"open", b"after"]


async def test_offsets_commit_only_with_the_transaction():
    drv = driver()
    broker = MemoryBroker.named(drv.settings.bootstrap_servers)
    producer = drv.producer(transactional_id="app-2")
    await producer.init_transactions()
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP("in", 0): 10}, "group")
    await producer.abort_transaction()
    assert broker.committed.get("group", {}) == {}
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP("in", 0): 12}, "group")
    await producer.commit_transaction()
    assert broker.committed["group"] == {TP("in", 0): 12}


async def test_a_new_instance_fences_the_zombie_and_aborts_its_open_transaction():
    drv = driver()
    tp = TP("t", 0)
    zombie = drv.producer(transactional_id="app-3")
    await zombie.init_transactions()
    await zombie.begin_transaction()
    await zombie.send("t", None, b"zombie", partition=0)
    successor = drv.producer(transactional_id="app-3")
    await successor.init_transactions()  # aborts the zombie's open transaction
    with pytest.raises(ProducerFenced):
        await zombie.send("t", None, b"late", partition=0)
    with pytest.raises(ProducerFenced):
        await zombie.commit_transaction()
    await successor.begin_transaction()
    await successor.send("t", None, b"successor", partition=0)
    await successor.commit_transaction()
    assert (await read(drv, tp, "read_committed"))[0] == [b"successor"]
