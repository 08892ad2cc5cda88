# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Records fetched while other partitions are rewound are delivered, not dropped.

The consume loop dropped every batch of a fetch that returned after a rewind began, because
the rewound partitions' batches come again from their seeks; the batches of partitions the
rewind did not touch had no seek and were skipped for good (at least once: an outage's rolled
back checkpoint rewound the partitions it had delivered, and a fetch in flight held the first
batch of another one; the Kafka chaos matrix, aiokafka, outage120: 33 outputs missing).
"""
from __future__ import annotations

from streamkit.testing import wait_for
from streamkit.transport import TP
from tests.helpers import memory_number_taker


async def test_a_batch_of_a_partition_not_rewound_is_delivered_when_its_fetch_returns_after_a_rewind(tmp_path):
    app, numbers, seen = memory_number_taker("rewind", tmp_path)

    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: len(runtime.assigned) == 2, 10, message="both partitions assigned")
        await numbers.send(key="k", value=0, partition=1)
        await wait_for(lambda: 0 in seen, 10, message="a record of partition 1 processed")
        await runtime.ownership.rewind([TP(numbers.name, 1)])  # while the consume loop waits in a fetch
        rounds = runtime.fetch_rounds
        await numbers.send(key="k", value=1, partition=0)  # that fetch returns this one
        await wait_for(lambda: runtime.fetch_rounds > rounds, 10, message="the fetch holding it returned")
        await numbers.send(key="k", value=2, partition=0)
        await wait_for(lambda: 2 in seen, 10, message="the later record of partition 0 processed")
        assert 1 in seen, "a record fetched around another partition's rewind was skipped"


async def test_a_batch_fetched_while_a_seek_to_the_committed_offsets_is_pending_is_read_once(tmp_path):
    """An assignment replaces a stale rewind by a seek to the committed offsets (no rewind, so
    nothing marked the fetch in flight as stale): a batch of that partition the fetch returned
    before the seek was delivered, and the seek then read it again (processed twice)."""
    app, numbers, seen = memory_number_taker("seekcommitted", tmp_path)

    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: len(runtime.assigned) == 2, 10, message="both partitions assigned")
        await numbers.send(key="k", value=0, partition=0)
        await wait_for(lambda: 0 in seen, 10, message="a record of partition 0 processed")
        rounds = runtime.fetch_rounds
        await runtime.ownership._seek_committed({TP(numbers.name, 0): 0})  # nothing committed: back to offset 0
        await numbers.send(key="k", value=1, partition=0)  # the fetch in flight returns it before the seek
        await wait_for(lambda: runtime.fetch_rounds > rounds, 10, message="the fetch holding it returned")
        await numbers.send(key="k", value=2, partition=1)
        await wait_for(lambda: 2 in seen and 1 in seen, 10, message="the later record and the seek's re-read")
        await numbers.send(key="k", value=3, partition=0)
        await wait_for(lambda: 3 in seen, 10, message="a record after the seek")
        assert seen.count(1) == 1, seen
