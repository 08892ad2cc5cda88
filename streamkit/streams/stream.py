"""Stream: what an agent iterates. A cursor over its subscriber's batches, plus operators.

A record counts as processed when the agent asks for the next one (Faust's model): whatever it
sent while handling the record is queued before the ack, and the checkpoint flushes the producer
before committing. Records taken but unfinished when an agent crashes are handed out again.
"""
from __future__ import annotations

import asyncio
import time
from itertools import repeat
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Generic, TypeVar

from ..runtime.event import Event, processing
from ..runtime.inbox import Batch, Subscriber
from ..sensors import NO_SENSORS
from ..transport.base import TP
from .chain import Chainable, Derived, Rebuild, current_event
from .fanout import branches

if TYPE_CHECKING:
    from ..topics import Topic

Held = tuple[Batch, int]

# A stream hands out the records of the batch in hand without awaiting; after SLICE seconds of
# that it lets the event loop run (the producer's sender, the next fetch's hand-over, aiokafka's
# heartbeats, timers, web views), reading the clock every CHECK_EVERY records. A backlog is one
# long run otherwise: the inbox hands over a queued batch without suspending either. 5 and 20 ms
# cost the aiokafka pipeline 3-5% (its fetcher and sender, given turns, work in smaller pieces).
SLICE = 0.05
CHECK_EVERY = 32
_clock = time.perf_counter


async def _get_within(queue: asyncio.Queue, timeout: float) -> Any:
    """``queue.get()`` with a timeout that never loses an item nor swallows a cancellation
    (``asyncio.wait_for`` can do either on Python 3.11)."""
    try:
        return queue.get_nowait()
    except asyncio.QueueEmpty:
        pass
    getter = asyncio.ensure_future(queue.get())
    try:
        await asyncio.wait({getter}, timeout=timeout)
    except asyncio.CancelledError:
        getter.cancel()
        raise
    if not getter.done():
        getter.cancel()
        await asyncio.wait({getter})  # it may still complete with an item: keep it then
    return None if getter.cancelled() else getter.result()


T = TypeVar("T")


class Stream(Chainable, Generic[T]):
    """Async-iterable over decoded values; one per agent instance, sharing a Subscriber.
    ``Stream[Order]`` annotates an agent's argument, as Faust's ``StreamT[Order]``."""

    def __init__(self, subscriber: Subscriber, *, topic: "Topic | None" = None, owner: Any = None) -> None:
        self.subscriber = subscriber
        self.topic = topic
        self.owner = owner  # the Agent, for group_by/through naming and supervision
        self.started = False  # has asked for its first record
        if owner is not None:
            owner.streams.append(self)
        self._batch: Batch | None = None
        self._idx = 0
        self._held: list[Held] = []
        # batch_in_hand holds the rest of a batch as one entry, the last of _held: (batch, last)
        # stands for the records _span..last of it (a pair a record cost 0.1 µs to make and free)
        self._span: int | None = None
        self._replay: list[Held] = []
        self._hold = False
        self._noack = False  # noack(): records wait for stream.ack(event) / event.ack()
        self.current_event: Event | None = None
        # sensors (sensors.py): the app's delegate; its ``active`` list is empty without sensors
        self._sensors = owner.app.sensors if owner is not None else NO_SENSORS
        self._sensed: tuple[Event, list[Any]] | None = None  # the event handed out, sensors' states
        self._run = 0  # records handed out since the clock was last read
        self._slice_end = 0.0  # when the stream next lets the loop run
        subscriber.cursors.append(self)

    # -- the cursor ---------------------------------------------------------------------------

    def _release_held(self) -> None:
        for batch, idx in self._held:  # a span's last entry acks it whole
            if batch.acked <= idx:
                batch.acked = idx + 1
        self._held.clear()
        self._span = None

    def _held_pairs(self) -> list[Held]:
        """Every held (batch, index), a span held by ``batch_in_hand`` spelled out."""
        held, first = self._held, self._span
        if first is None:
            return held
        batch, last = held[-1]
        return held[:-1] + list(zip(repeat(batch), range(first, last + 1)))

    def holds_any(self, tps: set[Any]) -> bool:
        return any(batch.tp in tps for batch, _ in self._held)

    def _next_in_batch(self) -> Event | None:
        """The next event of the batch in hand when nothing else has a say (no sensor, replay
        or committing barrier), acking the previous one unless holding (``take``); None: take
        ``next_event``. Synchronous, so iterating a batch costs no coroutine per record."""
        batch = self._batch
        if batch is None or self._sensed is not None or self._replay or batch.revoked:
            return None
        idx = self._idx + 1
        if idx >= len(batch.events):
            return None
        run = self._run + 1
        if run < CHECK_EVERY:
            self._run = run
        else:
            self._run = 0
            if _clock() >= self._slice_end:
                return None  # next_event lets the loop run first
        barrier = self.subscriber.barrier
        held = self._held
        if barrier is not None and barrier.closed and not (self._hold and held):
            return None  # next_event waits there (a record in hand is finished first)
        if not self._hold:
            for held_batch, held_idx in held:  # inline _release_held: this runs once per record
                if held_batch.acked <= held_idx:
                    held_batch.acked = held_idx + 1
            held.clear()
        return self._hand_out(batch, idx)

    def run_in_hand(self, event: Event | None, handle: Callable[[Event], Any]) -> Any:
        """``handle`` the record just handed out (``event``), then the rest of its batch as
        ``_next_in_batch`` would hand them out, without a coroutine: each record acked once
        handled, the last one left held (the next ask acks it, as any record). Stops at a
        ``handle`` result that is not None (returned: that record stays held while the caller
        awaits what is left of it), at a committing exactly-once checkpoint or a revocation, and
        after the first record when a sensor, replay or hold needs the per-record path."""
        assert event is not None
        result = handle(event)
        batch, idx = self._batch, self._idx
        if (result is not None or batch is None or self._sensed is not None or self._replay or self._hold
                or len(self._held) != 1 or batch.events[idx] is not event):
            return result
        events, set_event, barrier = batch.events, processing.set, self.subscriber.barrier
        last = len(events) - 1
        run, clock, slice_end = self._run, _clock, self._slice_end
        try:
            while idx < last and not batch.revoked and (barrier is None or not barrier.closed):
                run += 1
                if run >= CHECK_EVERY:
                    run = 0
                    if clock() >= slice_end:
                        run = CHECK_EVERY - 1  # the next take reads the clock: next_event lets the loop run
                        break
                idx += 1
                batch.acked = idx  # the one before is done (its outputs are queued)
                event = self.current_event = events[idx]
                set_event(event)
                result = handle(event)
                if result is not None:
                    break
        finally:  # also when handle raised: the record it raised on is the one held
            self._idx = idx
            self._held[0] = (batch, idx)
            self._run = run
        return result

    async def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event; acks the previous one unless holding. None only on ``timeout``."""
        if self._sensed is not None:
            self._sensed_out()
        held = self._held
        if held and not self._hold:  # inline _release_held: this runs once per record
            for batch, idx in held:
                if batch.acked <= idx:
                    batch.acked = idx + 1
            held.clear()
        if _clock() >= self._slice_end:  # the stream ran its slice: other tasks' turn
            await asyncio.sleep(0)
            self._slice_end, self._run = _clock() + SLICE, 0
        barrier = self.subscriber.barrier
        if barrier is not None and barrier.closed and not held:
            await self._past_barrier()  # an exactly-once checkpoint is committing
        while self._replay:
            batch, idx = self._replay.pop(0)
            if batch.revoked:
                continue
            return self._hand_out(batch, idx)
        current = self._batch
        if current is not None:
            idx = self._idx + 1
            if idx < len(current.events) and not current.revoked:
                return self._hand_out(current, idx)
            self._batch = None
        self.started = True  # waiting for records: the topology may be frozen (once per batch)
        return await self._next_batch(timeout)

    async def _next_batch(self, timeout: float | None) -> Event | None:
        """The first event of the next batch (a windowed join picks by time: joins/aligned.py)."""
        while True:
            if timeout is None:
                batch = await self.subscriber.inbox.get()
            else:
                batch = await _get_within(self.subscriber.inbox, timeout)
                if batch is None:
                    return None
            barrier = self.subscriber.barrier
            if barrier is not None and barrier.closed:
                await self._past_barrier()  # it came while a checkpoint commits: after it
            if not batch.revoked and batch.events:
                return self._hand_out(batch, 0)

    async def _past_barrier(self) -> None:
        """Wait while a checkpoint holds the streams between records (an exactly-once one
        commits), before taking a record while holding none. Also after waiting for the inbox: the
        checkpoint's wait for records in hand found
        this stream holding nothing, so a record taken now would run the agent during the commit
        (its send held at the gate, joining the next transaction even if this one rolls back
        and the record is read again). ``while``: the next checkpoint may close it again before
        this stream gets its turn."""
        barrier = self.subscriber.barrier
        while barrier is not None and barrier.closed:
            await barrier.wait()

    def _hand_out(self, batch: Batch, idx: int) -> Event:
        self._batch, self._idx = batch, idx
        self._held.append((batch, idx))
        event = self.current_event = batch.events[idx]
        if self._noack:
            event.stream = self  # event.ack()
        processing.set(event)
        if self._sensors.active:
            self._sensed = (event, self._sensors.call("on_stream_event_in", batch.tp, event.offset, self, event))
        return event

    def _sensed_out(self) -> None:
        assert self._sensed is not None
        (event, states), self._sensed = self._sensed, None
        tp = TP(event.topic, event.partition)
        self._sensors.call_each("on_stream_event_out", states, tp, event.offset, self, event)
        self._sensors.call("on_message_out", tp, event.offset, event.message)

    def held_events(self) -> list[Event]:
        """Events handed out and not yet acknowledged (the ones an agent failure concerns)."""
        return [batch.events[idx] for batch, idx in self._held_pairs()]

    def redeliver_held(self) -> None:
        """After an agent crash: hand the unfinished events out again, in order."""
        self._replay = self._held_pairs() + self._replay
        self._held, self._span = [], None
        self._hold = False

    def ack_held(self) -> None:
        """After the error policy dealt with the held events: count them as processed."""
        self._release_held()
        self._replay = []

    async def batch_in_hand(self) -> list[Event]:
        """The rest of the batch in hand (waiting for the next batch when none is), or the
        records to hand out again after a failure, all held until ``ack_held``: a columnar
        agent's unit of work (agents/columnar_body.py)."""
        self._hold = True
        self._release_held()
        take = self._next_in_batch
        events = [take() or await self.next_event()]  # without a timeout: an event
        while self._replay:  # a failed unit comes again whole
            events.append(await self.next_event())
        batch, first = self._batch, self._idx + 1
        if batch is None or self._sensed is not None or self._replay or batch.revoked:
            while (event := take()) is not None:  # record by record, as sensors hear of each
                events.append(event)
            return events  # type: ignore[return-value]  # see above
        rest = batch.events[first:]
        if rest:  # the batch's other records at once, held as one span (held_events spells it out)
            last = len(batch.events) - 1
            self._held.append((batch, last))
            self._span = first
            self._idx = last
            self.current_event = rest[-1]
            processing.set(rest[-1])
            events.extend(rest)
        return events  # type: ignore[return-value]  # see above

    # -- iteration ----------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._values()

    def _derive(self, iterator: AsyncIterator[Any], rebuild: "Rebuild | None" = None) -> "Derived":
        return Derived(self, iterator, rebuild)

    def _agent_stream(self) -> Stream:
        return self

    def _fresh(self) -> AsyncIterator[Any]:
        return self.__aiter__()

    async def _values(self) -> AsyncIterator[Any]:
        take = self._next_in_batch
        while True:
            event = take() or await self.next_event()
            assert event is not None
            yield event.value

    async def events(self) -> AsyncIterator[Event]:
        """Events with key, value, headers, topic, partition, offset and timestamp."""
        take = self._next_in_batch
        while True:
            event = take() or await self.next_event()
            assert event is not None
            yield event

    async def items(self) -> AsyncIterator[tuple[Any, Any]]:
        """``(key, value)`` pairs."""
        take = self._next_in_batch
        while True:
            event = take() or await self.next_event()
            assert event is not None
            yield event.key, event.value

    # -- operators ----------------------------------------------------------------------------

    async def take(self, n: int, within: float) -> AsyncIterator[list[Any]]:
        """Lists of up to ``n`` values, each given out after at most ``within`` seconds.

        The records of a list count as processed when the next list is requested.
        """
        async for events in self.take_events(n, within):
            yield [event.value for event in events]

    async def take_events(self, n: int, within: float) -> AsyncIterator[list[Event]]:
        """``take`` with the events (key, headers, offset...) instead of the values (Faust's)."""
        loop = asyncio.get_running_loop()
        take = self._next_in_batch
        while True:
            self._hold = True
            self._release_held()
            buffer: list[Event] = []
            deadline = loop.time() + within
            while len(buffer) < n:
                event = take()  # the rest of the batch in hand, at once
                if event is None:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    event = await self.next_event(timeout=remaining)
                    if event is None:
                        break
                buffer.append(event)
            if buffer:
                yield buffer
            self._hold = False

    async def take_with_timestamp(self, n: int, within: float, timestamp_field_name: str) -> AsyncIterator[list[Any]]:
        """Faust's: ``take``, with each dict value given its record's timestamp (seconds, as
        Faust's ``message.timestamp``) under ``timestamp_field_name``."""
        async for events in self.take_events(n, within):
            values = []
            for event in events:
                value = event.value
                if isinstance(value, dict) and timestamp_field_name:
                    stamp = event.timestamp
                    value[timestamp_field_name] = stamp / 1000 if stamp is not None else None
                values.append(value)
            yield values

    def noack(self) -> "Stream":
        """Faust's manual acks: from now on a record counts as processed only when
        ``stream.ack(event)`` is called for it (checkpoints never commit past one that was not)."""
        self._hold = self._noack = True
        return self

    def ack(self, event: Event) -> bool:
        """Mark ``event`` processed (after ``noack()``); False if it was not held."""
        self._held, self._span = self._held_pairs(), None  # a record of a span acked alone
        for i, (batch, idx) in enumerate(self._held):
            if batch.events[idx] is event:
                del self._held[i]
                still = [j for b, j in self._held if b is batch]
                handed = self._idx + 1 if batch is self._batch else len(batch.events)
                batch.acked = max(batch.acked, min(still) if still else handed)
                return True
        return False

    def tee(self, n: int = 2) -> tuple[Any, ...]:
        """``n`` streams that each get every record (streams/fanout.py); a record counts as
        processed once every branch asked for the one after it. Iterate all of them concurrently."""
        return branches(self, n)

    def left_join(self, *fields: Any) -> Any:
        raise _faust_join("left_join", "left")

    def inner_join(self, *fields: Any) -> Any:
        raise _faust_join("inner_join", "inner")

    def outer_join(self, *fields: Any) -> Any:
        raise _faust_join("outer_join", "outer")


__all__ = ["Chainable", "Derived", "Stream", "current_event"]  # Chainable, Derived, current_event: chain.py's


def _faust_join(method: str, how: str) -> TypeError:
    """Faust's field-list joins (NotImplementedError in Faust itself), refused with the way."""
    return TypeError(f"stream.{method}(*fields) is Faust's, which never ran there (NotImplementedError); join a "
                     f"table with stream.join(table, on=field, how={how!r})" if how != "outer" else
                     f"stream.{method}(*fields) is Faust's, which never ran there (NotImplementedError); an outer "
                     "join needs two changing sides: table.join(other, how='outer'), or two topics "
                     "left.join(right, within=..., how='outer') as an agent's input")
