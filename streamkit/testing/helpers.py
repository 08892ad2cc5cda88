"""Small helpers for tests against a broker: read a topic fully, wait on a condition."""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Awaitable, Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from ..settings import Settings
from .connection import confluent_conf


async def wait_for(condition: Callable[[], Any], timeout: float, interval: float = 0.05,
                   message: str = "condition") -> Any:
    """Poll ``condition`` (sync or async) until truthy; raise TimeoutError naming it after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {message}")
        await asyncio.sleep(interval)


def read_topic(where: str | Settings, topic: str, *, expect: int | None = None, timeout: float = 30.0,
               idle: float = 2.0, isolation: str = "read_uncommitted", to_end: bool = False) -> list[Any]:
    """Every record of ``topic`` from the beginning (confluent Message objects).

    ``where`` is an app's settings (``app.conf``: its TLS and SASL too) or an address (then the
    ``STREAMKIT_*`` security settings apply, as to an app). Stops once ``expect`` records
    arrived, or after ``idle`` seconds without new ones, or (``to_end``, for a topic nobody
    writes any more) once every partition was read up to the end its last fetch reported and
    ``END_SETTLE`` passed without new records. With ``to_end`` a pause is not an end: ``idle``
    does not apply (a loaded broker can answer a fetch slowly), only ``timeout`` bounds the read.
    """
    meta = AdminClient(confluent_conf(where)).list_topics(topic, timeout=10)
    partitions = list(meta.topics[topic].partitions)
    consumer = Consumer(confluent_conf(where, **{"group.id": f"reader-{uuid.uuid4().hex[:8]}",
                                                  "enable.auto.commit": False, "isolation.level": isolation,
                                                  "fetch.queue.backoff.ms": 10}))
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(10000, 0.2)
            got = [m for m in batch if m.error() is None]
            if got:
                records.extend(got)
                last_new = time.monotonic()
            if expect is not None and len(records) >= expect:
                break
            if expect is None and not to_end and time.monotonic() - last_new > idle:
                break
            if to_end and expect is None and time.monotonic() - last_new >= END_SETTLE and at_end(consumer):
                break
    finally:
        consumer.close()
    return records


# A fetch cycle (fetch.wait.max.ms is 500): the end a fetch reports may predate a transaction
# marker written a moment after its commit returned; one more cycle without records settles it.
END_SETTLE = 1.0


def at_end(consumer: Any) -> bool:
    """Every assigned partition's position reached the high watermark of its last fetch response
    (exact on the dev broker too, whose ListOffsets answer is not); an empty one counts once a
    fetch said so."""
    for tp in consumer.position(consumer.assignment()):
        low, high = consumer.get_watermark_offsets(tp, cached=True)
        if high < 0:  # no fetch response yet
            return False
        if (tp.offset < 0 and high > low) or 0 <= tp.offset < high:
            return False
    return True
