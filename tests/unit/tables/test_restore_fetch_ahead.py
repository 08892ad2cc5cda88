"""A restore fetches the next batch while it applies one. A client's position then counts the
records fetched ahead: a partition must not be called restored on that position while those
records are still to be applied (they would be dropped as "past the end")."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from streamkit.tables.recovery import RecoveryProgress, replay
from streamkit.tables.stores import MemoryStore
from streamkit.transport.base import TP
from streamkit.transport.columns import Columns
from streamkit.transport.memory import MemoryBroker, MemoryConsumer, MemoryDriver


class FetchesAtOnce(MemoryConsumer):
    """Fetches the moment a fetch starts, as a driver fetching on its own thread (confluent)
    does, not when the event loop next runs the fetching task."""

    def getmany_columns(self, timeout, max_records):  # type: ignore[override]
        fetched = asyncio.get_running_loop().create_future()
        fetched.set_result({tp: Columns.of(records) for tp, records in self._collect(max_records).items()})
        return fetched


class FetchesAtOnceDriver(MemoryDriver):
    def consumer(self, group_id, **overrides):
        return FetchesAtOnce(self.broker, group_id, "earliest", "read_uncommitted")


def test_a_partition_whose_records_were_fetched_ahead_restores_all_of_them():
    name = f"ahead-{uuid.uuid4().hex[:6]}"
    driver = FetchesAtOnceDriver(SimpleNamespace(bootstrap_servers=name, auto_offset_reset="earliest",
                                                 isolation_level="read_uncommitted"))
    broker = MemoryBroker.named(name)
    try:
        broker.create_topic("changelog", 2)
        big, small = TP("changelog", 0), TP("changelog", 1)
        for i in range(15_000):  # more than one fetch (10,000 records): the small one comes in the second
            broker.append("changelog", b"b%d" % i, b"%d" % i, big.partition, None, None)
        for i in range(5):
            broker.append("changelog", b"s%d" % i, b"%d" % i, small.partition, None, None)
        stores = {big: MemoryStore(), small: MemoryStore()}
        done: list[TP] = []
        applied = asyncio.run(replay(driver, stores, RecoveryProgress(), on_done=done.append))
        assert sorted(done) == [big, small]
        assert len(stores[small].data) == 5 and stores[small].offset == 4
        assert len(stores[big].data) == 15_000 and stores[big].offset == 14_999
        assert applied == 15_005
    finally:
        MemoryBroker.forget(name)
