"""PendingDeliveries: every delivery's outcome is read, the error names them all, nothing is
left "never retrieved" (mutation testing showed these were unpinned)."""
from __future__ import annotations

import asyncio
import gc

import pytest

from streamkit.transport.pending import DeliveryFailed, PendingDeliveries


def failed(loop, message):
    fut = loop.create_future()
    fut.set_exception(RuntimeError(message))
    return fut


def ok(loop):
    fut = loop.create_future()
    fut.set_result((0, 1))
    return fut


async def test_the_error_counts_every_failure_and_names_the_first():
    loop = asyncio.get_running_loop()
    pending = PendingDeliveries()
    for fut in (ok(loop), failed(loop, "first"), failed(loop, "second"), failed(loop, "third")):
        pending.add(fut)
    with pytest.raises(DeliveryFailed) as caught:
        await pending.settle()
    assert str(caught.value) == "3 record(s) not delivered: RuntimeError('first') (and 2 more)"
    assert [str(e) for e in caught.value.failures] == ["first", "second", "third"]
    assert len(pending) == 0
    await pending.settle()  # settled: nothing is raised twice


async def test_one_failure_says_so_without_a_count_of_more():
    loop = asyncio.get_running_loop()
    pending = PendingDeliveries()
    pending.add(failed(loop, "only"))
    with pytest.raises(DeliveryFailed, match=r"^1 record\(s\) not delivered: RuntimeError\('only'\)$"):
        await pending.settle()


async def test_settle_waits_for_unfinished_deliveries_and_keeps_later_sends():
    loop = asyncio.get_running_loop()
    pending = PendingDeliveries()
    slow = loop.create_future()
    pending.add(slow)
    settling = asyncio.create_task(pending.settle())
    await asyncio.sleep(0)
    later = loop.create_future()
    pending.add(later)  # sent while the checkpoint waits: belongs to the next one
    assert not settling.done()
    slow.set_exception(RuntimeError("late failure"))
    with pytest.raises(DeliveryFailed, match="late failure"):
        await settling
    assert len(pending) == 1  # ``later`` stays
    later.set_result((0, 2))
    await pending.settle()
    assert len(pending) == 0


async def test_a_cancelled_delivery_is_a_failure():
    loop = asyncio.get_running_loop()
    pending = PendingDeliveries()
    fut = loop.create_future()
    fut.cancel()
    pending.add(fut)
    pending.add(ok(loop))
    with pytest.raises(DeliveryFailed) as caught:
        await pending.settle()
    assert str(caught.value).startswith("1 record(s) not delivered: CancelledError('a queued record was cancelled")


async def test_discard_reads_every_outcome_now_or_later(caplog):
    loop = asyncio.get_running_loop()
    pending = PendingDeliveries()
    done_failed, still_open, cancelled = failed(loop, "aborted"), loop.create_future(), loop.create_future()
    cancelled.cancel()
    for fut in (done_failed, still_open, cancelled, ok(loop)):
        pending.add(fut)
    pending.discard()
    assert len(pending) == 0
    still_open.set_exception(RuntimeError("purged"))
    await asyncio.sleep(0)  # the done callback runs
    del done_failed, still_open, cancelled
    gc.collect()
    await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text


async def test_two_settles_at_once_each_check_what_they_waited_for():
    """A worker's checkpoint and an app.flush() may settle the same producer at once: the second
    must neither crash on the first having taken its futures (zip() of unequal lists, seen on
    Apache Kafka) nor drop futures added meanwhile unchecked; a failure reaches whoever waited on it."""
    import asyncio

    from streamkit.transport.pending import DeliveryFailed, PendingDeliveries

    loop = asyncio.get_running_loop()
    pending = PendingDeliveries()
    first, second = loop.create_future(), loop.create_future()
    pending.add(first, "a")
    waiting_1 = asyncio.ensure_future(pending.settle())
    await asyncio.sleep(0)
    pending.add(second, "b")
    waiting_2 = asyncio.ensure_future(pending.settle())
    await asyncio.sleep(0)
    first.set_result(None)
    await asyncio.sleep(0)
    later = loop.create_future()
    pending.add(later, "c")  # added while the second still waits: not its to take
    second.set_exception(RuntimeError("broker said no"))
    assert await asyncio.gather(waiting_1, return_exceptions=True) == [None]
    [failed] = await asyncio.gather(waiting_2, return_exceptions=True)
    assert isinstance(failed, DeliveryFailed) and failed.topics == ["b"]
    assert len(pending) == 1  # `later` stays for the next settle, unchecked so far
    later.set_result(None)
    await pending.settle()
    assert len(pending) == 0
