# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Driver contract on a real broker: produce, end offsets, commit/committed, seek, pause."""
import pytest

from streamkit import Settings
from streamkit.testing.capabilities import PROBES
from streamkit.transport import TP, TopicSpec, create_driver


async def prepared(broker_address, driver, topic, records):
    drv = create_driver(Settings(broker=broker_address, driver=driver, session_timeout_ms=6000,
                                 heartbeat_interval_ms=1000))
    admin = drv.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(topic, 2)])
    await admin.stop()
    producer = drv.producer()
    await producer.start()
    for i in range(records):
        await producer.send(topic, f"k{i}".encode(), str(i).encode(), partition=0)
    await producer.flush()
    await producer.stop()
    return drv


@pytest.mark.requires("end_offsets_exact")
async def test_end_offsets_count_every_record(broker_address, driver, unique):
    topic = f"eo-{unique}"
    drv = await prepared(broker_address, driver, topic, 10)
    consumer = drv.consumer(None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TP(topic, 0), TP(topic, 1)])
    finally:
        await consumer.stop()
    assert ends == {TP(topic, 0): 10, TP(topic, 1): 0}


async def test_manual_assign_seek_commit_and_committed(broker_address, driver, unique):
    topic = f"as-{unique}"
    drv = await prepared(broker_address, driver, topic, 20)
    tp = TP(topic, 0)
    consumer = drv.consumer(f"grp-{unique}")
    await consumer.start()
    try:
        await consumer.assign([tp], {tp: 5})
        got = []
        for _ in range(100):
            batches = await consumer.getmany(0.2, 100)
            got += [m.offset for m in batches.get(tp, [])]
            if len(got) >= 15:
                break
        assert got == list(range(5, 20))
        await consumer.commit({tp: 12})
        assert (await consumer.committed([tp]))[tp] == 12
        await consumer.seek(tp, 18)
        again = []
        for _ in range(100):
            again += [m.offset for m in (await consumer.getmany(0.2, 100)).get(tp, [])]
            if len(again) >= 2:
                break
        assert again == [18, 19]
    finally:
        await consumer.stop()


def test_capability_probe_answers_every_question(capabilities):
    """Each probe runs to an answer: a probe that raises is only reported as "probe failed"."""
    for name in PROBES:
        ok, reason = capabilities.check(name)
        print(f"\nbroker capability {name}: {ok} ({reason})")
        assert isinstance(ok, bool) and reason
        assert not reason.startswith("probe failed"), f"the {name} probe did not answer: {reason}"


async def test_sends_land_where_kafkas_partitioner_puts_them_in_order_with_their_timestamps(broker_address, driver,
                                                                                            unique):
    """Tracked and untracked sends, mixed, as sinks and ``topic.send`` make them: each key's records
    in its murmur2 partition, in send order, with the timestamps given; a tracked send's result
    names its own partition and offset (the aiokafka driver batches both kinds itself); headers
    where given (librdkafka's produce takes them by position: confluent_producer.py)."""
    from streamkit.testing.helpers import read_topic
    from streamkit.transport.base import delivery_position
    from streamkit.transport.partitioner import partition_for_key

    topic = f"order-{unique}"
    drv = create_driver(Settings(broker=broker_address, driver=driver))
    admin = drv.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(topic, 3)])
    await admin.stop()
    producer = drv.producer()
    await producer.start()
    base_ms = 1_767_225_600_000
    tracked = {}
    try:
        await producer.send(topic, b"warm-up", b"-1", timestamp=base_ms)  # metadata known from here
        for i in range(600):
            key, value = f"user-{i % 7}".encode(), str(i).encode()
            headers = [("i", value)] if i % 3 == 0 else None
            if i % 10 == 0:
                tracked[i] = await producer.send(topic, key, value, timestamp=base_ms + i, headers=headers)
            elif not producer.try_send(topic, key, value, None, headers, base_ms + i):
                await producer.send(topic, key, value, timestamp=base_ms + i, headers=headers, track=False)
        await producer.flush()
        positions = {i: delivery_position(await fut) for i, fut in tracked.items()}
    finally:
        await producer.stop()
    records = [m for m in read_topic(broker_address, topic, expect=601) if m.value() != b"-1"]
    assert len(records) == 600
    for m in records:
        i = int(m.value())
        assert m.partition() == partition_for_key(m.key(), 3), (i, m.partition())
        assert m.timestamp()[1] == base_ms + i
        assert (m.headers() or None) == ([("i", m.value())] if i % 3 == 0 else None), i
    for partition in range(3):
        sent = [int(m.value()) for m in records if m.partition() == partition]
        assert sent == sorted(sent)  # send order kept within the partition
    by_value = {int(m.value()): (m.partition(), m.offset()) for m in records}
    assert positions == {i: by_value[i] for i in tracked}


async def test_a_topic_the_aiokafka_producer_found_known_stays_in_its_metadata(broker_address, unique):
    """aiokafka's client fetches every topic's metadata until a send names a topic it does not
    know; from then on it refreshes only the topics it was told of. A topic its first fetch already
    knew was never told, so the next refresh dropped it: batches of that topic queued at that moment
    waited for a leader until they expired (NotLeaderForPartition after request_timeout_ms, 40 s),
    failing the checkpoint, whose records then went through twice (a Faust app's first outputs,
    about 1 run in 3 on the dev broker). Every topic the producer writes stays in its metadata."""
    earlier, later = f"earlier-{unique}", f"later-{unique}"
    drv = create_driver(Settings(broker=broker_address, driver="aiokafka"))
    admin = drv.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(earlier, 2)])
    producer = drv.producer()
    await producer.start()  # its first metadata fetch (every topic) knows `earlier`
    try:
        await (await producer.send(earlier, b"k", b"1"))
        await admin.create_topics([TopicSpec(later, 2)])
        await (await producer.send(later, b"k", b"2"))  # unknown: aiokafka starts tracking topics
        cluster = producer._client.client  # what aiokafka's sender looks leaders up in
        await cluster.force_metadata_update()
        assert cluster.cluster.partitions_for_topic(earlier) == {0, 1}
        await (await producer.send(earlier, b"k", b"3"))
        await producer.flush()
    finally:
        await producer.stop()
        await admin.stop()


@pytest.mark.requires("refuses_oversized_records")
async def test_a_transaction_holding_a_record_the_broker_refused_does_not_commit(broker_address, unique, capabilities):
    """A transactional librdkafka producer's untracked sends report nothing one by one
    (confluent_producer.UnreportedCount): a record the broker refused must still keep its
    transaction from committing, and read_committed readers see none of it."""
    from streamkit.errors import TransactionAborted
    from streamkit.testing.helpers import read_topic
    from streamkit.transport.pending import DeliveryFailed

    topic = f"small-{unique}"
    drv = create_driver(Settings(broker=broker_address, driver="confluent"))
    admin = drv.admin()
    await admin.start()
    await admin.create_topics([TopicSpec(topic, 1, config={"max.message.bytes": "2000"})])
    await admin.stop()
    producer = drv.producer(transactional_id=f"refused-{unique}")
    await producer.start()
    try:
        await producer.init_transactions()
        await producer.begin_transaction()
        assert producer.try_send(topic, b"k", b"fits")
        assert producer.try_send(topic, b"k", b"x" * 20_000)  # over the topic's limit: refused by the broker
        with pytest.raises((DeliveryFailed, TransactionAborted)):
            await producer.flush()
            await producer.commit_transaction()
        await producer.abort_transaction()
    finally:
        await producer.stop()
    hides_aborted, _ = capabilities.check("read_committed_hides_aborted")
    if hides_aborted:  # the dev broker shows aborted records to read_committed readers
        assert read_topic(broker_address, topic, isolation="read_committed", idle=3) == []
