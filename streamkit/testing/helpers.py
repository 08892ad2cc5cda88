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
               idle: float = 2.0, isolation: str = "read_uncommitted") -> list[Any]:
    """Every record of ``topic`` from the beginning (confluent Message objects).

    ``where`` is an app's settings (``app.conf``: its TLS and SASL too) or an address (then the
    ``STREAMKIT_*`` security settings apply, as to an app). Stops once ``expect`` records
    arrived, or after ``idle`` seconds without new ones.
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
            if expect is None and time.monotonic() - last_new > idle:
                break
    finally:
        consumer.close()
    return records
