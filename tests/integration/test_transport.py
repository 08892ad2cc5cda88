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
