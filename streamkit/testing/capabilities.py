"""Ask a broker what it can do, so tests that need a missing semantic skip with the reason.

The dev broker (Tansu) and Apache Kafka differ: Tansu shows aborted transactional records to
read_committed readers and answers ListOffsets "latest" wrongly; aiokafka cannot start a
transactional producer on it. Each probe uses a fresh topic and takes well under a second.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..settings import Settings
from ..transport.security import aiokafka_common
from .connection import client_settings, confluent_conf


class ProbeInconclusive(Exception):
    """The probe could not tell (its marker never arrived): neither yes nor no."""


@dataclass
class Capabilities:
    """Probe results per capability: True/False with the reason, or None when the probe raised
    or could not conclude ("unknown": a broken probe must not pass for a missing feature)."""

    address: str
    results: dict[str, tuple[bool | None, str]] = field(default_factory=dict)
    settings: Settings | None = None
    """How the probes connect; None: the ``STREAMKIT_*`` settings aimed at ``address``."""

    def check(self, name: str) -> tuple[bool | None, str]:
        if name not in self.results:
            probe = PROBES.get(name)
            if probe is None:
                raise KeyError(f"unknown broker capability {name!r}; known: {', '.join(PROBES)}")
            try:
                self.results[name] = probe(self.settings or client_settings(self.address))
            except Exception as exc:
                self.results[name] = (None, f"probe failed: {exc!r}")
        return self.results[name]


def _topic(settings: Settings, partitions: int = 1) -> str:
    name = f"probe-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(confluent_conf(settings))
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def _read(settings: Settings, topic: str, isolation: str, timeout: float = 8.0) -> list[bytes]:
    consumer = Consumer(confluent_conf(settings, **{"group.id": f"probe-{uuid.uuid4().hex[:8]}",
                                                     "isolation.level": isolation, "enable.auto.commit": False,
                                                     "auto.offset.reset": "earliest"}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(int(timeout / 0.5)):
            for m in consumer.consume(100, 0.5):
                value = m.value()
                if m.error() is None and value is not None:  # the probe's own records all have one
                    values.append(value)
            if b"done" in values:
                break
    finally:
        consumer.close()
    return values


def read_committed_hides_aborted(settings: Settings) -> tuple[bool, str]:
    topic = _topic(settings)
    producer = Producer(confluent_conf(settings, **{"transactional.id": f"probe-{uuid.uuid4().hex}"}))
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"aborted")
    producer.flush(15)  # abort_transaction purges unsent records: make sure it reached the broker
    producer.abort_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, b"done")
    producer.commit_transaction(15)
    values = _read(settings, topic, "read_committed")
    if b"done" not in values:  # an empty read proves nothing
        raise ProbeInconclusive(f"the committed marker never arrived (read {len(values)} record(s))")
    if b"aborted" in values:
        return False, "this broker shows aborted transactional records to read_committed consumers"
    return True, "read_committed hides aborted records"


def end_offsets_exact(settings: Settings) -> tuple[bool, str]:
    topic = _topic(settings)
    producer = Producer(confluent_conf(settings, **{"linger.ms": 50}))
    for _ in range(5):
        producer.produce(topic, b"x", partition=0)
    producer.produce(topic, b"done", partition=0)
    producer.flush(15)
    consumer = Consumer(confluent_conf(settings, **{"group.id": f"probe-{uuid.uuid4().hex[:8]}"}))
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        from confluent_kafka import OFFSET_END

        latest = consumer.offsets_for_times([TopicPartition(topic, 0, OFFSET_END)], timeout=10)[0].offset
    finally:
        consumer.close()
    if high != 6 or latest not in (6, -1):
        return False, f"end offset of a 6-record partition reported as {high} (ListOffsets latest: {latest})"
    return True, "end offsets are exact"


def aiokafka_transactions(settings: Settings) -> tuple[bool, str]:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        producer = AIOKafkaProducer(**aiokafka_common(settings), transactional_id=f"probe-{uuid.uuid4().hex}")
        try:
            await asyncio.wait_for(producer.start(), 15)
        finally:
            await producer.stop()

    try:
        asyncio.run(go())
    except Exception as exc:
        return False, f"aiokafka cannot start a transactional producer here: {type(exc).__name__}"
    return True, "aiokafka transactional producer starts"


def delete_records(settings: Settings) -> tuple[bool, str]:
    topic = _topic(settings)
    producer = Producer(confluent_conf(settings))
    for _ in range(3):
        producer.produce(topic, b"x", partition=0)
    producer.flush(15)
    admin = AdminClient(confluent_conf(settings))
    try:
        admin.delete_records([TopicPartition(topic, 0, 2)], request_timeout=10)[TopicPartition(topic, 0)].result(15)
    except Exception as exc:  # the dev broker closes the connection: it does not know DeleteRecords
        return False, f"this broker does not delete records (DeleteRecords: {exc})"
    consumer = Consumer(confluent_conf(settings, **{"group.id": f"probe-{uuid.uuid4().hex[:8]}"}))
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        consumer.close()
    if low != 2:
        return False, f"DeleteRecords below offset 2 left the log start at {low}"
    return True, "DeleteRecords moves the log start"


def refuses_oversized_records(settings: Settings) -> tuple[bool, str]:
    name = f"probe-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(confluent_conf(settings))
    admin.create_topics([NewTopic(name, 1, 1, config={"max.message.bytes": "2000"})])[name].result(15)
    producer = Producer(confluent_conf(settings, **{"message.timeout.ms": 10000}))
    outcome: list = []
    producer.produce(name, b"x" * 20_000, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    if not outcome:
        raise ProbeInconclusive("the oversized record was never reported")
    if outcome[0] is None:
        return False, "this broker accepts a record over its topic's max.message.bytes"
    return True, f"a record over max.message.bytes is refused ({outcome[0].name()})"


PROBES = {
    "delete_records": delete_records,
    "refuses_oversized_records": refuses_oversized_records,
    "read_committed_hides_aborted": read_committed_hides_aborted,
    "end_offsets_exact": end_offsets_exact,
    "aiokafka_transactions": aiokafka_transactions,
}
