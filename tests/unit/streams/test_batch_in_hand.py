# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""A columnar agent's unit of work (``Stream.batch_in_hand``): the rest of a batch, held until
``ack_held``, handed out again whole after a crash. The rest of a batch is held as one span,
not one (batch, index) pair a record (0.1 µs a record to make and free)."""
from __future__ import annotations

import asyncio

from streamkit.runtime.event import Event
from streamkit.runtime.inbox import Batch, Subscriber
from streamkit.streams.stream import Stream
from streamkit.transport.base import TP, Message

TP0 = TP("in", 0)


def batch(first: int, count: int) -> Batch:
    return Batch(TP0, [Event(None, offset, Message("in", 0, offset, None, b"", None, None))
                       for offset in range(first, first + count)])


async def stream_with(*batches: Batch) -> tuple[Stream, Subscriber]:
    subscriber = Subscriber("t", 8)
    for queued in batches:
        await subscriber.put(queued)
    return Stream(subscriber), subscriber


async def test_the_rest_of_a_batch_is_held_until_acked_then_the_next_batch_follows():
    first, second = batch(0, 1000), batch(1000, 3)
    stream, subscriber = await stream_with(first, second)
    events = await asyncio.wait_for(stream.batch_in_hand(), 5)
    assert [e.offset for e in events] == list(range(1000))
    assert stream.held_events() == events and stream.holds_any({TP0})
    assert len(stream._held) <= 2, "held one pair a record"  # the first record's pair, and the span
    assert subscriber.first_unprocessed(TP0) == 0, "a checkpoint would pass records still in hand"
    stream.ack_held()
    assert stream.held_events() == [] and not stream.holds_any({TP0})
    assert subscriber.first_unprocessed(TP0) == 1000
    assert [e.offset for e in await asyncio.wait_for(stream.batch_in_hand(), 5)] == [1000, 1001, 1002]
    stream.ack_held()
    assert subscriber.first_unprocessed(TP0) is None


async def test_after_a_crash_the_held_batch_comes_again_whole_and_in_order():
    stream, subscriber = await stream_with(batch(0, 50))
    events = await asyncio.wait_for(stream.batch_in_hand(), 5)
    stream.redeliver_held()  # what supervision does when the body raised holding them
    assert stream.held_events() == [] and subscriber.first_unprocessed(TP0) == 0
    again = await asyncio.wait_for(stream.batch_in_hand(), 5)
    assert again == events and stream.held_events() == events
    stream.ack_held()
    assert subscriber.first_unprocessed(TP0) is None


async def test_a_batch_started_record_by_record_is_held_from_where_it_stood():
    stream, subscriber = await stream_with(batch(0, 10))
    assert (await stream.next_event()).offset == 0  # an earlier unit took the first record
    stream.ack_held()
    rest = await asyncio.wait_for(stream.batch_in_hand(), 5)
    assert [e.offset for e in rest] == list(range(1, 10)) and stream.held_events() == rest
    assert subscriber.first_unprocessed(TP0) == 1
    stream.ack_held()
    assert subscriber.first_unprocessed(TP0) is None
