# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""A rewind scheduled while partitions are revoked does not outlive their ownership.

A checkpoint rolled back during a revocation (exactly-once, aiokafka, the Kafka chaos matrix's
freeze45: the broker frozen 45 s, both workers' sessions lost) scheduled a seek back to the
last committed offsets of the partitions being revoked. The revocation ended before the consume
loop applied it, so the seek stayed pending; the other worker took the partitions, processed and
committed them, and when the group handed them back the stale seek moved the consumer back
behind the new committed offsets: 2,572 outputs written twice, 151 table sums over their truth.
"""
from __future__ import annotations

from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker
from tests.helpers import memory_number_taker


async def test_a_rewind_pending_when_a_partition_is_revoked_is_not_applied_when_it_comes_back(tmp_path):
    app, numbers, seen = memory_number_taker("stale", tmp_path)

    async with app.running():
        runtime = app.runtime
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        tp = TP(numbers.name, 1)
        await wait_for(lambda: len(runtime.assigned) == 2, 10, message="both partitions assigned")
        await numbers.send(key="k", value=0, partition=1)
        await wait_for(lambda: 0 in seen, 10, message="the first record processed")
        await runtime.commit()
        assert broker.committed[app.id][tp] == 1
        real_commit = runtime.commit

        async def rolled_back(tps=None, *, wait=True):  # the revocation's checkpoint fails and rewinds
            await runtime.ownership.rewind(list(tps or runtime.assigned))
            raise RuntimeError("transaction rolled back (injected)")

        runtime.commit = rolled_back
        await runtime.ownership.on_revoked([tp])
        runtime.commit = real_commit
        # meanwhile another worker processes offset 1 and commits past it
        broker.append(numbers.name, b"k", b"1", 1, None, None)
        broker.committed[app.id][tp] = 2
        await runtime.consumer.seek(tp, 2)  # a fresh assignment starts at the committed offset
        await runtime.ownership.on_assigned([tp])
        await numbers.send(key="k", value=2, partition=1)
        await wait_for(lambda: 2 in seen, 10, message="the record after the committed offset processed")
        assert 1 not in seen, "a stale rewind re-read a record another worker had committed"
