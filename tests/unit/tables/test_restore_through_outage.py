"""A table restore that starts while the broker is away waits for it, as every other call of
the commit protocol does; it halted the worker before (the Kafka chaos matrix, confluent,
outage10: the restore's end-offset lookup failed once with a transport error, and the
worker stopped with "table recovery failed")."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from streamkit.tables.recovery import RecoveryProgress, replay
from streamkit.tables.stores import MemoryStore
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker, MemoryDriver


def test_a_restore_begun_during_an_outage_finishes_once_the_broker_is_back():
    name = f"outage-{uuid.uuid4().hex[:6]}"
    driver = MemoryDriver(SimpleNamespace(bootstrap_servers=name, auto_offset_reset="earliest",
                                          isolation_level="read_uncommitted"))
    broker = MemoryBroker.named(name)
    try:
        broker.create_topic("changelog", 1)
        for i in range(50):
            broker.append("changelog", b"k%d" % i, b"%d" % i, 0, None, None)
        stores = {TP("changelog", 0): MemoryStore()}
        broker.faults.outage(1.0)

        async def restore():
            return await asyncio.wait_for(replay(driver, stores, RecoveryProgress()), 20)

        assert asyncio.run(restore()) == 50
        assert len(stores[TP("changelog", 0)].data) == 50 and stores[TP("changelog", 0)].offset == 49
    finally:
        MemoryBroker.forget(name)
