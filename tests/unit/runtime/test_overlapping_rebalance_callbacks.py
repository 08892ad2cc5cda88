# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Rebalance callbacks are handled one at a time, and a partition assigned meanwhile is read
only once its assignment is handled.

A revocation can outlast the client's wait for it (the confluent driver returns to librdkafka
after 120 s): a worker whose group session expired during a broker outage kept committing its
lost partitions until the broker came back, and librdkafka's next assignment was handled while
that revocation still ran. Its end then removed a partition the new assignment had just given
back (the Kafka chaos matrix, confluent, exactly-once, outage45: partition 4 owned by nobody,
3,388 outputs missing when the run ended).
"""
from __future__ import annotations

import asyncio

from streamkit.testing import wait_for
from streamkit.transport import TP
from tests.helpers import memory_number_taker


async def test_an_assignment_handled_while_a_revocation_runs_keeps_its_partitions(tmp_path):
    app, numbers, seen = memory_number_taker("overlap", tmp_path)

    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: len(runtime.assigned) == 2, 10, message="both partitions assigned")
        tp = TP(numbers.name, 1)
        gate = asyncio.Event()
        real_release = runtime.ownership.release

        async def slow_release(tps, timeout, *, commit=True):  # a commit waiting for a broker that is away
            await gate.wait()
            await real_release(tps, timeout, commit=commit)

        runtime.ownership.release = slow_release
        revoking = asyncio.create_task(runtime.ownership.on_revoked([tp]))
        await asyncio.sleep(0.05)
        assigning = asyncio.create_task(runtime.ownership.on_assigned([tp]))  # the client moved on
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.wait_for(asyncio.gather(revoking, assigning), 10)
        assert tp in runtime.assigned
        await numbers.send(key="k", value=7, partition=1)
        await wait_for(lambda: 7 in seen, 10, message="a record of the partition given back is processed")
