# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""TransactionalProducer.commit, unit by unit (EOS v1: one transaction per task): a task given up
meanwhile is skipped without stopping the others; a unit that fails reports its own error while
the next one still commits; the ids are the task's, stable across workers (so a new owner
fences a zombie)."""
from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

import streamkit as sk
from streamkit.runtime.event import processing
from streamkit.runtime.transactions import TransactionalProducer
from streamkit.testing import wait_for
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryDriver, MemoryProducer
from streamkit.transport.pending import DeliveryFailed


async def units(name, owned, *, per_partition=True, topic="in", partitions=4):
    """A started TransactionalProducer on a fresh memory broker, owning tasks ``owned`` of ``topic``."""
    app = sk.App(name, broker=f"memory://{name}", driver="memory")
    driver = MemoryDriver(app.conf)
    driver.broker.create_topic(topic, partitions)
    txns = TransactionalProducer(driver, name, per_partition=per_partition, transactional_id=f"{name}-w",
                                 partition_count=lambda _topic: partitions)
    await txns.start()
    await txns.assigned([TP(topic, p) for p in owned])
    return driver.broker, txns


async def test_a_task_given_up_is_skipped_and_the_later_tasks_still_commit():
    name = f"units-{uuid.uuid4().hex[:6]}"
    broker, txns = await units(name, owned=[1, 3])
    try:
        outcome = await txns.commit({TP("in", 0): 5, TP("in", 1): 7, TP("in", 3): 9}, name)
        assert outcome == {(4, 1): None, (4, 3): None}  # task 0 was never (or no longer) ours
        assert broker.committed[name] == {TP("in", 1): 7, TP("in", 3): 9}
    finally:
        await txns.stop()


async def test_a_failed_unit_reports_its_error_and_the_next_unit_commits():
    name = f"units-{uuid.uuid4().hex[:6]}"
    broker, txns = await units(name, owned=[0, 2])
    try:
        broker.faults.fail_txn_commits = 1  # the first unit's commit (tasks commit in order)
        outcome = await txns.commit({TP("in", 0): 3, TP("in", 2): 4}, name)
        assert isinstance(outcome[(4, 0)], Exception) and outcome[(4, 2)] is None
        assert broker.committed[name] == {TP("in", 2): 4}
        assert not txns.dirty  # neither is left marked: the caller decides what the failure means
    finally:
        await txns.stop()


async def test_task_transactional_ids_name_the_app_the_task_and_the_partition_count():
    name = f"units-{uuid.uuid4().hex[:6]}"
    _, txns = await units(name, owned=[2])
    try:
        assert txns.unit_transactional_id((4, 2)) == f"{name}-task-2of4"
        assert sorted(txns.units) == [(4, 2)]
    finally:
        await txns.stop()


async def test_sends_wait_while_a_commit_holds_them_and_go_into_the_next_transaction():
    """EOS v2 (one unit): a send made while the checkpoint commits must not join the committing
    transaction; it waits, then joins the next one."""
    import asyncio

    broker, txns = await units(f"units-{uuid.uuid4().hex[:6]}", [], per_partition=False, topic="out", partitions=1)
    name = txns.app_id
    try:
        async with txns.sends_paused():
            held = asyncio.create_task(txns.send("out", b"k", b"late", partition=0))
            await asyncio.sleep(0)
            assert not txns.try_send("out", b"k", b"refused", 0), "try_send went through a paused gate"
            await txns.commit({}, name)
            assert not held.done() and not txns.dirty, "a send joined the committing transaction"
        await held
        assert txns.dirty == {(0, 0)}  # the send is in the transaction opened after the commit
        await txns.commit({}, name)
        assert [m.value for m in broker.logs["out"][0] if m.value is not None] == [b"late"]
    finally:
        await txns.stop()


# -- the clients underneath: what TransactionalProducer asks of each producer it holds ---------

class Recorded(MemoryProducer):
    """A memory producer that remembers what it was asked: each send's ``track``, whether it was
    stopped. ``gate``: its sends wait there first (a client whose send awaits, as aiokafka's
    does); its ``try_send`` queues at once (as confluent's does)."""

    def __init__(self, broker, transactional_id=None):
        super().__init__(broker, transactional_id)
        self.tracks: list[bool] = []
        self.sent_values: list[bytes | None] = []
        self.stopped = False
        self.gate: asyncio.Event | None = None
        self.sending = asyncio.Event()

    async def send(self, topic, key, value, *, partition=None, headers=None, timestamp=None, track=True):
        self.tracks.append(track)
        self.sent_values.append(value)
        if self.gate is not None:
            self.sending.set()
            await self.gate.wait()
        return await super().send(topic, key, value, partition=partition, headers=headers,
                                  timestamp=timestamp, track=track)

    def try_send(self, topic, key, value, partition=None, headers=None, timestamp=None):
        self.broker.append(topic, key, value, partition, headers, timestamp, self._txn)
        return True

    async def stop(self):
        self.stopped = True
        await super().stop()


class RecordingDriver(MemoryDriver):
    def __init__(self, settings):
        super().__init__(settings)
        self.made: list[Recorded] = []

    def producer(self, **overrides):
        producer = Recorded(self.broker, overrides.get("transactional_id"))
        self.made.append(producer)
        return producer


async def recorded_units(owned, *, per_partition=True, topic="in", partitions=4):
    name = f"units-{uuid.uuid4().hex[:6]}"
    driver = RecordingDriver(sk.App(name, broker=f"memory://{name}", driver="memory").conf)
    driver.broker.create_topic(topic, partitions)
    driver.broker.create_topic("out", 1)
    txns = TransactionalProducer(driver, name, per_partition=per_partition, transactional_id=f"{name}-w",
                                 partition_count=lambda _topic: partitions)
    await txns.start()
    await txns.assigned([TP(topic, p) for p in owned])
    return driver, txns


@contextmanager
def processing_record_of(tp):
    """Sends made here are those of a record of ``tp`` (as inside an agent)."""
    token = processing.set(SimpleNamespace(topic=tp.topic, partition=tp.partition))
    try:
        yield
    finally:
        processing.reset(token)


def committed_values(broker, topic):
    tp = TP(topic, 0)
    hidden = broker.aborted.get(tp, set()) | broker.control.get(tp, set())
    return [m.value for m in broker.logs[topic][0][:broker.stable_offset(tp)] if m.offset not in hidden]


async def test_a_send_started_before_the_commit_is_waited_for_and_committed_with_it():
    """A client whose send awaits (aiokafka): the commit must not run while a send is half-way,
    or the record lands in the next transaction, without the offsets of the record that made it."""
    driver, txns = await recorded_units([], per_partition=False, topic="out", partitions=1)
    worker = txns.units[(0, 0)]
    worker.gate = asyncio.Event()
    committed = asyncio.Event()
    try:
        sending = asyncio.create_task(txns.send("out", b"k", b"started", partition=0))
        await asyncio.wait_for(worker.sending.wait(), 5)

        async def checkpoint():
            async with txns.sends_paused():
                await txns.commit({}, txns.app_id)
                committed.set()

        commit = asyncio.create_task(checkpoint())
        await wait_for(lambda: not txns._open.is_set() or committed.is_set(), 5, message="the commit paused sends")
        assert not committed.is_set(), "the commit ran while a send was half-way"
        worker.gate.set()
        await asyncio.wait_for(commit, 5)
        await sending
        assert committed_values(driver.broker, "out") == [b"started"]
    finally:
        await txns.stop()


async def test_try_send_is_refused_while_sends_are_paused():
    """A client that queues without awaiting (confluent's try_send): while a commit holds sends,
    nothing may slip into the committing transaction that way either."""
    driver, txns = await recorded_units([], per_partition=False, topic="out", partitions=1)
    try:
        assert txns.try_send("out", b"k", b"before", 0)
        async with txns.sends_paused():
            assert not txns.try_send("out", b"k", b"refused", 0), "try_send went through a paused gate"
            await txns.commit({}, txns.app_id)
        assert committed_values(driver.broker, "out") == [b"before"]
        assert [m.value for m in driver.broker.logs["out"][0] if m.value is not None] == [b"before"]
    finally:
        await txns.stop()


async def test_track_is_forwarded_to_the_transaction_s_producer():
    """Untracked sends (send_soon, dead letters) stay untracked: a client keeps no future for them."""
    driver, txns = await recorded_units([], per_partition=False, topic="out", partitions=1)
    try:
        await txns.send("out", b"k", b"untracked", partition=0, track=False)
        await txns.send("out", b"k", b"tracked", partition=0)
        assert txns.units[(0, 0)].tracks == [False, True]
    finally:
        await txns.stop()


async def test_a_task_given_up_ends_its_open_transaction_and_stops_its_producer():
    """close_units: a record sent into the task's transaction after its last commit must not stay
    in an open transaction (read_committed readers of the topic would stop at it)."""
    driver, txns = await recorded_units([1, 2])
    try:
        old = txns.units[(4, 1)]
        with processing_record_of(TP("in", 1)):
            await txns.send("out", b"k", b"late", partition=0)
        assert driver.broker.stable_offset(TP("out", 0)) == 0
        await txns.close_units({(4, 1)})
        assert old.stopped and (4, 1) not in txns.units and (4, 2) in txns.units
        tp = TP("out", 0)
        assert driver.broker.stable_offset(tp) == driver.broker.end_offset(tp), "the transaction was left open"
        assert committed_values(driver.broker, "out") == []
    finally:
        await txns.stop()


async def test_reopen_and_renew_stop_the_producer_they_replace():
    driver, txns = await recorded_units([], per_partition=False, topic="out", partitions=1)
    try:
        first = txns.units[(0, 0)]
        await txns.renew((0, 0))
        second = txns.units[(0, 0)]
        assert first.stopped and second is not first and not second.stopped
        await txns.reopen((0, 0))
        third = txns.units[(0, 0)]
        assert second.stopped and third is not second and not third.stopped
    finally:
        await txns.stop()
    assert third.stopped


async def test_stop_ends_every_unit_s_transaction_and_stops_every_producer():
    driver, txns = await recorded_units([0, 3])
    with processing_record_of(TP("in", 3)):
        await txns.send("out", b"k", b"never committed", partition=0)
    await txns.stop()
    assert len(driver.made) == 3 and all(p.stopped for p in driver.made)  # the plain one and two tasks
    tp = TP("out", 0)
    assert driver.broker.stable_offset(tp) == driver.broker.end_offset(tp), "a transaction was left open"
    assert committed_values(driver.broker, "out") == []


async def test_partition_mode_the_plain_producer_is_flushed_and_stopped():
    """EOS v1: sends made outside any record go through the plain producer; the worker's flush
    (app.flush, the stop) reports their failed deliveries, and the stop closes it."""
    driver, txns = await recorded_units([0])
    plain = txns.plain
    driver.broker.faults.fail_sends = 1
    await txns.send("out", b"k", b"from a timer", partition=0)
    with pytest.raises(DeliveryFailed):
        await txns.flush()
    await txns.stop()
    assert plain.stopped


async def test_partition_mode_a_commit_says_when_records_sent_outside_any_record_were_lost(caplog):
    driver, txns = await recorded_units([0])
    try:
        driver.broker.faults.fail_sends = 1
        await txns.send("out", b"k", b"from a timer", partition=0)
        with processing_record_of(TP("in", 0)):
            await txns.send("out", b"k", b"from a record", partition=0)
        with caplog.at_level(logging.ERROR, logger="streamkit.transactions"):
            outcome = await txns.commit({TP("in", 0): 1}, txns.app_id)
        assert outcome == {(4, 0): None}
        assert [r for r in caplog.records if "were lost" in r.getMessage() and r.levelname == "ERROR"]
        assert committed_values(driver.broker, "out") == [b"from a record"]
        await txns.flush()  # reported once, at the commit
    finally:
        await txns.stop()


async def test_a_sends_route_follows_its_task_being_given_up_and_owned_again():
    """Routes are remembered per source partition: a task given up must drop its records' sends
    from then on, and owning it again must route them into the new producer's transaction."""
    driver, txns = await recorded_units([1])
    try:
        with processing_record_of(TP("in", 1)):
            await txns.send("out", b"k", b"first", partition=0)
            first = txns.units[(4, 1)]
            await txns.close_units({(4, 1)})
            await txns.send("out", b"k", b"given up", partition=0)
            assert txns.orphans_dropped == 1 and first.sent_values == [b"first"]
            await txns.assigned([TP("in", 1)])
            await txns.send("out", b"k", b"owned again", partition=0)
            second = txns.units[(4, 1)]
            assert second is not first and second.sent_values == [b"owned again"]
    finally:
        await txns.stop()


async def test_a_send_while_tasks_are_being_given_up_never_reaches_a_given_up_producer():
    """close_units closes one task's producer at a time, awaiting each: a record's send made
    meanwhile (the route of a task still listed, remembered then) must not go to that task's
    producer after it too is given up — dropped, as any send of a given-up task."""
    driver, txns = await recorded_units([1, 2])
    try:
        closing: list = []  # the producers whose close began, in order
        release = asyncio.Event()
        tasks = {txns.units[task]: task for task in ((4, 1), (4, 2))}

        def slow_abort(producer):
            async def abort():  # the first close waits here, as a broker round trip would
                closing.append(producer)
                if len(closing) == 1:
                    await release.wait()
            return abort

        for producer in tasks:
            producer.abort_transaction = slow_abort(producer)
        given_up = asyncio.create_task(txns.close_units({(4, 1), (4, 2)}))
        await wait_for(lambda: closing, timeout=5)
        later, = (producer for producer in tasks if producer is not closing[0])  # still ours here
        source = TP("in", tasks[later][1])
        with processing_record_of(source):
            assert txns.try_send("out", b"k", b"while closing", 0)
        assert b"while closing" in [m.value for m in driver.broker.logs["out"][0]]
        release.set()
        await asyncio.wait_for(given_up, 5)
        assert later.stopped and tasks[later] not in txns.units
        with processing_record_of(source):
            assert txns.try_send("out", b"k", b"after", 0)  # accepted and dropped, not sent
            await txns.send("out", b"k", b"after, awaited", partition=0)
        assert txns.orphans_dropped == 2
        sent = [m.value for m in driver.broker.logs["out"][0]]
        assert b"after" not in sent and b"after, awaited" not in sent
    finally:
        await txns.stop()


@pytest.mark.parametrize("per_partition", [False, True])
async def test_a_records_send_held_through_a_rolled_back_commit_is_dropped(per_partition):
    """A send that waits while a commit holds sends (a dead letter made while a batch is being
    delivered, a send that did not fit the client's queue) and whose record's transaction is then
    rolled back must not go into the next transaction: the record is read again from the committed
    offset and sends it again. Sent, it was committed twice (Apache Kafka 4.1, exactly-once with a
    rebalance: 6 dead letters and an output doubled)."""
    driver, txns = await recorded_units([1, 2], per_partition=per_partition)
    task = txns.unit_of(TP("in", 1))
    try:
        async with txns.sends_paused():
            with processing_record_of(TP("in", 1)):
                held = asyncio.ensure_future(txns.send("out", b"k", b"of a rolled-back record", partition=0))
            with processing_record_of(TP("in", 2)):
                other = asyncio.ensure_future(txns.send("out", b"k", b"of another task", partition=0))
            untied = asyncio.ensure_future(txns.send("out", b"k", b"a timer's", partition=0))
            await asyncio.sleep(0.01)
            assert not held.done()
            txns.rolled_back(task)
        await asyncio.gather(held, other, untied)
        sent = [v for producer in driver.made for v in producer.sent_values]
        assert b"of a rolled-back record" not in sent
        assert b"a timer's" in sent  # no record to read again: it joins the next transaction
        assert (b"of another task" in sent) == per_partition  # EOS v2: one unit, every task rolled back
        assert txns.rolled_back_dropped == (1 if per_partition else 2)
    finally:
        await txns.stop()


async def test_a_task_producer_that_cannot_reach_the_broker_is_opened_once_it_is_back():
    """EOS v1 opens a task's producer as its partitions are assigned. A frozen broker at that
    moment failed ``start()`` (aiokafka: KafkaConnectionError, retriable); the error escaped the
    assignment callback, the partitions stayed paused for "fencing" and the worker stalled for
    good (the freeze-45 s chaos run on Apache Kafka 4.1, aiokafka, exactly-once: 1,000 of 20,000
    outputs); once it came back, aiokafka's start met metadata without brokers ("Did we not
    perform bootstrap?", an AssertionError) and halted the worker. The broker away is waited
    out, and the producers that failed are closed."""
    from aiokafka.errors import KafkaConnectionError

    name = f"away-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory")
    driver = MemoryDriver(app.conf)
    driver.broker.create_topic("in", 2)
    made: list[MemoryProducer] = []
    stopped: list[MemoryProducer] = []
    real_producer = driver.producer

    def producer(**kwargs):
        made_one = real_producer(**kwargs)
        if kwargs.get("transactional_id") is None:
            return made_one  # the plain producer, started before the outage
        made.append(made_one)
        if len(made) <= 2:  # the task producer's first two attempts meet the broker away
            attempt = len(made)

            async def start():
                if attempt == 1:
                    raise KafkaConnectionError("Unable to bootstrap from 127.0.0.1:29092")
                raise AssertionError("Did we not perform bootstrap?")  # aiokafka, metadata without brokers

            async def stop():
                stopped.append(made_one)

            made_one.start, made_one.stop = start, stop
        return made_one

    driver.producer = producer
    txns = TransactionalProducer(driver, name, per_partition=True, transactional_id=f"{name}-w",
                                 partition_count=lambda _topic: 2)
    await txns.start()
    await txns.assigned([TP("in", 1)])
    assert set(txns.units) == {(2, 1)} and len(made) == 3
    assert stopped == made[:2]
