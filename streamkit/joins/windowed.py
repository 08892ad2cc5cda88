"""Windowed stream-stream joins: ``orders.join(payments, within=timedelta(minutes=5))`` is an
agent input whose stream yields ``(order, payment)`` for every pair with the same key whose
timestamps are close enough; Kafka Streams' semantics after KIP-633.

Time: a left record at ``t`` pairs with right records in ``[t - before, t + after]`` (``within``
sets both). Each partition keeps a stream time ``S``, the largest timestamp either side carried;
a record with ``t < S - grace`` is late: dropped and counted (``late_records``), never joined.
A left record is kept until ``S > t + after + grace`` (no record still accepted can pair with it
after that), a right record until ``S > t + before + grace``. ``how="left"``/``"outer"`` give
``(left, None)``/``(None, right)`` for a record that paired with nothing, when it is dropped from
the buffer: after its window closed, never early, never after it paired (no spurious nulls).

State: both sides' records wait in one internal table (RocksDB or memory, with a changelog, so
it is checkpointed with the offsets, in the exactly-once transaction, and recovered): the store
key is the record's key bytes (length-prefixed), its side, timestamp and offset; the value its
bytes as received plus whether it paired. An index of (key, timestamp) per partition is kept in
memory and rebuilt from the store after an assignment, a recovery or a rolled-back checkpoint.
Both topics must have the same partition count and keys serialised alike (checked at start).

``close_idle_after``: a partition whose records stopped coming has its stream time move with the
wall clock after that long (as windowed tables do), so its unpaired records go out without
waiting for its next record; the stream wakes for them (JoinStream).
Each partition's two sides are read in timestamp order (aligned.py), so catching up on two
filled topics makes no record late.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import struct
from bisect import bisect_left, insort
from collections import deque
from datetime import timedelta
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator

from ..codecs import RawCodec
from ..errors import ConfigurationError
from ..runtime.event import Event, processing
from ..runtime.inbox import Batch
from ..streams.stream import Stream, _get_within
from ..tables.late import describe_late
from ..tables.table import DELETED, Table, TablePartition
from ..tables.values import TableEntries
from ..topics import Topic, TopicGroup
from ..transport.base import TP, Message
from ..transport.partitioner import partition_for_key
from .aligned import AlignmentCounters, TimeAligner

if TYPE_CHECKING:
    from ..types.app import AppProtocol

log = logging.getLogger("streamkit.joins")

WINDOW_HOWS = ("inner", "left", "outer")
LEFT, RIGHT = 0, 1
STREAM_TIME_KEY = b"\xff\xff\xff\xff"  # never a record key: no key is 4 GiB long
_LENGTH = struct.Struct(">I")
_TAIL = struct.Struct(">BQq")  # side, timestamp (sign-flipped), offset
_TIME = struct.Struct(">q")
_SIGN = 1 << 63
PAIRED, UNPAIRED = b"\x01", b"\x00"

# One output of the join: the record it is keyed by (the input record for a pair, the record
# itself for one emitted alone: its own key, topic, offset and time) and ``(left, right)``.
Joined = tuple[Event, tuple[Any, Any]]


def _ms(value: Any, what: str) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ConfigurationError(f"{what} must not be negative, got {value!r}")
    return round(seconds * 1000)


class JoinWindows:
    """How close two records' timestamps must be: ``within`` either way, or ``before``/``after``
    (how far a right record may precede/follow a left one); ``grace``: how far behind the stream
    time a record may arrive and still join."""

    def __init__(self, within: Any = None, *, before: Any = None, after: Any = None, grace: Any = 0,
                 close_idle_after: Any = None) -> None:
        if within is None and (before is None or after is None):
            raise ConfigurationError("a windowed join needs within= (or both before= and after=)")
        self.before = _ms(within if before is None else before, "before")
        self.after = _ms(within if after is None else after, "after")
        self.grace = _ms(grace, "grace")
        self.close_idle_after = None if close_idle_after is None else _ms(close_idle_after, "close_idle_after")

    def describe(self) -> str:
        span = (f"within {self.before / 1000:g}s" if self.before == self.after
                else f"{self.before / 1000:g}s before to {self.after / 1000:g}s after")
        idle = "" if self.close_idle_after is None else f", closed after {self.close_idle_after / 1000:g}s idle"
        return f"{span}, grace {self.grace / 1000:g}s{idle}"


def buffer_key(key: bytes, side: int, ts: int, offset: int) -> bytes:
    return _LENGTH.pack(len(key)) + key + _TAIL.pack(side, ts + _SIGN, offset)


def split_buffer_key(store_key: bytes) -> tuple[bytes, int, int]:
    (length,) = _LENGTH.unpack_from(store_key)
    side, ts, _ = _TAIL.unpack_from(store_key, 4 + length)
    return store_key[4:4 + length], side, ts - _SIGN


class _Buffered:
    """A partition's buffered records as the join needs them: by key and side, and by when
    each leaves the buffer."""

    __slots__ = ("part", "stream_time", "index", "leaving", "unpaired", "active_at", "idle_from")

    def __init__(self, part: TablePartition, now: float) -> None:
        self.part = part
        self.stream_time: int | None = None
        self.active_at = now  # when a record last came (close_idle_after; the app's clock, seconds)
        self.idle_from: int | None = None  # the stream time when the partition went idle
        self.index: tuple[dict[bytes, list[tuple[int, bytes]]], ...] = ({}, {})  # side -> key -> [(ts, store key)]
        self.leaving: list[tuple[int, bytes]] = []  # heap of (leaves when S passes this, store key)
        self.unpaired: set[bytes] = set()  # store keys that would be emitted alone when they leave


class JoinBuffer(Table):
    """The internal table holding both sides' records (module docstring)."""

    def __init__(self, app: "AppProtocol", name: str, join: "WindowJoin") -> None:
        super().__init__(app, name, key_type=bytes, value_type=bytes)
        self.window_join = join  # not ``join``: that is Table.join, the table-table join
        self.key_codec = RawCodec()
        self.value_codec = RawCodec()
        self.entries = TableEntries(self.key_codec, self.value_codec, key_declared=True)
        self._state: dict[int, _Buffered] = {}

    def partition_of(self, key_bytes: bytes | None) -> int:
        if not key_bytes or key_bytes == STREAM_TIME_KEY:
            return 0
        return partition_for_key(split_buffer_key(key_bytes)[0], self.partitions)

    def forget_writes(self, number: int) -> None:
        super().forget_writes(number)
        self._state.pop(number, None)

    def state_of(self, part: TablePartition) -> _Buffered:
        state = self._state.get(part.number)
        if state is None or state.part is not part:
            state = self._state[part.number] = self._rebuild(part)
        return state

    def _rebuild(self, part: TablePartition) -> _Buffered:
        """From the store, the committed state (after an assignment, a recovery or a rollback)."""
        state = _Buffered(part, self.app.clock.monotonic())
        emits = self.window_join.emits
        for store_key, raw in part.store.items():
            if store_key == STREAM_TIME_KEY:
                state.stream_time = _TIME.unpack(raw)[0]
                continue
            key, side, ts = split_buffer_key(store_key)
            self._track(state, key, side, ts, store_key, unpaired=emits[side] and raw[:1] == UNPAIRED)
        return state

    def _track(self, state: _Buffered, key: bytes, side: int, ts: int, store_key: bytes, *, unpaired: bool) -> None:
        window = self.window_join.window
        entries = state.index[side].setdefault(key, [])
        if entries and entries[-1] > (ts, store_key):
            insort(entries, (ts, store_key))  # out of order: kept sorted, the window is a slice
        else:
            entries.append((ts, store_key))
        heapq.heappush(state.leaving, (ts + (window.after if side == LEFT else window.before) + window.grace, store_key))
        if unpaired:
            state.unpaired.add(store_key)

    def raw(self, part: TablePartition, store_key: bytes) -> bytes | None:
        """A buffered record's stored bytes (flag + value), or None once it left."""
        value = part.cache.get(store_key)
        if value is None:
            value = part.flushing.get(store_key)
        if value is None:
            value = part.store.get(store_key)
        return None if value is DELETED else value

    def buffered(self) -> Iterator[tuple[int, int, bytes]]:
        """(partition, side, key) of every record this worker holds (tests, diagnostics)."""
        for number, part in self.local.items():
            for key, side, _ in (split_buffer_key(k) for k, _ in self._items_raw(part)):
                yield number, side, key

    def _items_raw(self, part: TablePartition) -> Iterator[tuple[bytes, bytes]]:
        overlay = {**part.flushing, **part.cache}
        for store_key, raw in part.store.items():
            if store_key not in overlay and store_key != STREAM_TIME_KEY:
                yield store_key, raw
        for store_key, raw in overlay.items():
            if raw is not DELETED and store_key != STREAM_TIME_KEY:
                yield store_key, raw


class WindowJoin(TopicGroup):
    """``left.join(right, within=...)``: an agent input over both topics whose stream yields the
    joined pairs (module docstring)."""

    def __init__(self, app: "AppProtocol", left: Topic, right: Topic, window: JoinWindows, how: str,
                 name: str | None = None) -> None:
        if how not in WINDOW_HOWS:
            raise ConfigurationError(f"a windowed join is how='inner', 'left' or 'outer', not {how!r}")
        if left.name == right.name:
            raise ConfigurationError(f"a topic cannot be joined with itself ({left.name!r}): read it once and "
                                     "keep what you need in a table")
        for topic in (left, right):
            if len(topic.members) != 1 or getattr(topic, "is_channel", False):
                raise ConfigurationError(f"a windowed join joins two topics; {topic!r} is not one topic")
        super().__init__(app, [left, right])
        self.left, self.right = left, right
        self.window = window
        self.how = how
        self.emits = (how in ("left", "outer"), how == "outer")  # per side: emitted alone when unpaired
        self.late_records = 0
        self.skipped_records = 0  # without a key or a value: nothing to join on
        self.alignment = AlignmentCounters()  # how its readers kept the two sides in time order
        self.one_reader = ("a windowed join reads each partition's two sides in timestamp order, in one stream; "
                           "leave concurrency at 1 and give the topics more partitions to spread the join over "
                           "more workers")
        table_name = name or f"{left.name}-{right.name}-join"
        if table_name in app.tables:
            raise ConfigurationError(f"join state {table_name!r} is defined twice: give the join a name=")
        self.buffer = app.tables[table_name] = JoinBuffer(app, table_name, self)
        app.joins.append(self)

    def __repr__(self) -> str:
        return f"<WindowJoin {self.left.name} x {self.right.name} {self.how}>"

    # the topology's view (JoinDeclared's fields)
    @property
    def streams(self) -> tuple[str, str]:
        return self.left.name, self.right.name

    @property
    def table(self) -> JoinBuffer:
        return self.buffer

    def describe(self) -> str:
        return (f"join {self.left.name} with {self.right.name} ({self.how}, {self.window.describe()}) "
                f"buffered in table {self.buffer.name}")

    def make_stream(self, subscriber: Any, owner: Any) -> "JoinStream":
        return JoinStream(subscriber, topic=self, owner=owner)

    # -- one record -------------------------------------------------------------------------------

    def process(self, event: Any) -> list[Joined]:
        """Join ``event`` (of either side) into its partition's buffer; the pairs it makes and
        the unpaired records whose window its time closed, each with the record it is keyed by
        (an unpaired record is keyed by itself, not by ``event``, whose time closed its window)."""
        message = event.message
        key, raw_value, ts = message.key, message.value, event.timestamp
        if key is None or raw_value is None or ts is None:
            self.skipped_records += 1
            if self.skipped_records == 1:
                log.warning("join %s: a record without a key, value or timestamp (%s[%d]@%d) cannot be joined; "
                            "such records are skipped and counted", self.buffer.name, event.topic,
                            event.partition, event.offset)
            return []
        buffer = self.buffer
        part = buffer._partition(event.partition, key, False)  # noqa: SLF001 - the join's buffer is a windowed table it owns
        state = buffer.state_of(part)
        window = self.window
        now = state.stream_time
        if now is not None and ts < now - window.grace:
            self._late(event, ts, now)
            return []
        if window.close_idle_after is not None:
            state.active_at, state.idle_from = self.app.clock.monotonic(), None
        side = LEFT if message.topic == self.left.name else RIGHT
        out: list[Joined] = []
        others = state.index[1 - side].get(key)
        if others:
            lo, hi = (ts - window.before, ts + window.after) if side == LEFT else (ts - window.after, ts + window.before)
            decode = (self.right if side == LEFT else self.left).value_codec.decode
            for i in range(bisect_left(others, (lo,)), len(others)):  # sorted by time: only the window's
                other_ts, store_key = others[i]
                if other_ts > hi:
                    break
                stored = buffer.raw(part, store_key)
                if stored is None:
                    continue
                other = decode(stored[1:])
                out.append((event, (event.value, other) if side == LEFT else (other, event.value)))
                if store_key in state.unpaired:
                    state.unpaired.discard(store_key)
                    part.cache[store_key] = PAIRED + stored[1:]
        store_key = buffer_key(key, side, ts, message.offset)
        part.cache[store_key] = (PAIRED if out else UNPAIRED) + raw_value
        buffer._track(state, key, side, ts, store_key, unpaired=self.emits[side] and not out)  # noqa: SLF001 - the join's buffer is a windowed table it owns
        if now is None or ts > now:
            state.stream_time = now = ts
            part.cache[STREAM_TIME_KEY] = _TIME.pack(ts)
        self._let_go(state, part, now, out)
        return out

    def _let_go(self, state: _Buffered, part: TablePartition, now: int, out: list[Joined]) -> None:
        """Every buffered record whose window the stream time ``now`` closed leaves the buffer;
        the unpaired ones go to ``out``, alone."""
        leaving = state.leaving
        while leaving and leaving[0][0] < now:
            _, gone = heapq.heappop(leaving)
            out.extend(self._leave(state, part, gone))

    def idle_poll(self) -> float | None:
        """Seconds a stream may wait for records before ``close_idle`` has to look again; None:
        nothing would leave without a record (no ``close_idle_after``, or nothing unpaired)."""
        idle_after = self.window.close_idle_after
        if idle_after is None or not any(state.unpaired for state in self.buffer._state.values()):  # noqa: SLF001 - the join's buffer is a windowed table it owns
            return None
        return min(idle_after / 1000, 1.0)

    def close_idle(self) -> list[Joined]:
        """``close_idle_after``: each partition without records for that long has its stream
        time moved with the clock since then; the unpaired records whose window that closes."""
        idle_after = self.window.close_idle_after
        out: list[Joined] = []
        if idle_after is None:
            return out
        now = self.app.clock.monotonic()
        for number, state in list(self.buffer._state.items()):  # noqa: SLF001 - the join's buffer is a windowed table it owns
            part = self.buffer.local.get(number)
            if part is None or state.part is not part or not part.ready or not state.unpaired:
                continue
            idle_ms = round((now - state.active_at) * 1000)
            if state.stream_time is None or idle_ms < idle_after:
                continue
            if state.idle_from is None:
                state.idle_from = state.stream_time
            moved = state.idle_from + idle_ms - idle_after
            if moved <= state.stream_time:
                continue
            state.stream_time = moved
            part.cache[STREAM_TIME_KEY] = _TIME.pack(moved)
            self._let_go(state, part, moved, out)
        return out

    def _leave(self, state: _Buffered, part: TablePartition, store_key: bytes) -> list[Joined]:
        key, side, ts = split_buffer_key(store_key)
        entries = state.index[side].get(key)
        if entries is not None:
            at = bisect_left(entries, (ts, store_key))
            if at < len(entries) and entries[at][1] == store_key:
                del entries[at]
            if not entries:
                del state.index[side][key]
        alone: list[Joined] = []
        if store_key in state.unpaired:
            state.unpaired.discard(store_key)
            stored = self.buffer.raw(part, store_key)
            if stored is not None:
                record = self._buffered_record(part.number, store_key, key, side, ts, stored[1:])
                alone.append((record, (record.value, None) if side == LEFT else (None, record.value)))
        part.cache[store_key] = DELETED
        return alone

    def _buffered_record(self, partition: int, store_key: bytes, key: bytes, side: int, ts: int,
                         value: bytes) -> Event:
        """A buffered record as the event it was read as (its headers are not kept)."""
        topic = self.left if side == LEFT else self.right
        offset = _TAIL.unpack_from(store_key, len(store_key) - _TAIL.size)[2]
        message = Message(topic.name, partition, offset, key, value, None, ts)
        return Event(topic.key_codec.decode(key), topic.value_codec.decode(value), message)

    def _late(self, event: Any, ts: int, now: int) -> None:
        self.late_records += 1
        if self.late_records == 1:
            log.warning("join %s: a late record (%s[%d]@%d, %s): records more than grace behind the stream "
                        "time are dropped and counted; declare a larger grace= to join records this far out of "
                        "order", self.buffer.name, event.topic, event.partition, event.offset,
                        describe_late(event.key, ts, now, self.window.grace))
        elif self.late_records % 1000 == 0:
            log.warning("join %s: %d late record(s) dropped so far", self.buffer.name, self.late_records)


class JoinStream(Stream):
    """The stream of a WindowJoin input: pairs, in the order the records that made them were
    read: each partition's two sides in timestamp order (aligned.py)."""

    def __init__(self, subscriber: Any, *, topic: Any = None, owner: Any = None) -> None:
        super().__init__(subscriber, topic=topic, owner=owner)
        self._aligner: TimeAligner | None = None
        # unpaired records an idle partition let go (close_idle_after), each held while the agent
        # handles it, so a checkpoint waits for it and a crash hands it out again (_idle_outputs)
        self._idle: deque[tuple[Batch, Joined]] = deque()

    async def _next_batch(self, timeout: float | None) -> Any:
        join: WindowJoin = self.topic  # type: ignore[assignment]
        aligner = self._aligner
        if aligner is None:
            aligner = self._aligner = TimeAligner(join.left.name, join.right.name, join.app.processing,
                                                  join.alignment, f"join {join.buffer.name}")
        inbox = self.subscriber.inbox
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            while not inbox.empty():  # whatever the router queued, without waiting
                aligner.add(inbox.get_nowait())
            picked = await aligner.pick(loop.time())
            if isinstance(picked, tuple):
                await self._past_barrier()  # see Stream._past_barrier
                if picked[0].revoked:
                    continue  # rewound while it waited: the router delivers it again
                event = self._hand_out(*picked)
                self._batch = None  # the next record is picked again, not the batch's next
                return event
            wait = picked
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    return None
                wait = left if wait is None else min(wait, left)
            batch = await (inbox.get() if wait is None else _get_within(inbox, wait))
            if batch is not None:
                aligner.add(batch)

    def _keyed_by(self, record: Event) -> None:
        """Make ``record`` the current event (an unpaired record's own, for its outputs' key,
        a table write's partition and the exactly-once transaction it joins)."""
        if self.current_event is not record:
            self.current_event = record
            processing.set(record)

    async def _joined(self) -> AsyncIterator[Joined]:
        """Every output with the record it is keyed by, which is the current event while the
        agent handles it."""
        join: WindowJoin = self.topic  # type: ignore[assignment]
        while True:
            async for joined in self._idle_outputs():
                yield joined
            poll = join.idle_poll()
            event = await self.next_event(poll)
            if event is None:  # no record within the poll: an idle partition may let records go
                await self._past_barrier()  # not while an exactly-once checkpoint commits
                self._release_held()
                for joined in join.close_idle():
                    batch = Batch(TP(joined[0].topic, joined[0].partition), [joined[0]])
                    batch.revoked = True  # never handed out again as a record to join
                    self._idle.append((batch, joined))
                continue
            for record, pair in join.process(event):
                self._keyed_by(record)
                yield record, pair

    async def _idle_outputs(self) -> AsyncIterator[Joined]:
        """The idle partitions' unpaired records, each held while the agent handles it; one
        whose handling failed comes again (retries), one the error policy took is acked."""
        idle = self._idle
        while idle:
            batch, (record, pair) = idle[0]
            if batch.acked:  # given up: the error policy has it
                idle.popleft()
                continue
            self._release_held()
            self._held.append((batch, 0))
            self._keyed_by(record)
            yield record, pair
            idle.popleft()

    async def _values(self) -> AsyncIterator[Any]:
        async for _, pair in self._joined():
            yield pair

    async def items(self) -> AsyncIterator[tuple[Any, Any]]:
        """``(key, (left, right))``: the key both records share, or an unpaired record's own."""
        async for record, pair in self._joined():
            yield record.key, pair

    async def events(self) -> AsyncIterator[Any]:
        raise TypeError("a windowed join's stream gives pairs: iterate it (or .items() for the key); "
                        "stream.current_event is the record that made the pair")
        yield  # pragma: no cover


def windowed_join(left: Topic, right: Any, *, within: Any, before: Any, after: Any, grace: Any, how: str,
                  name: str | None, close_idle_after: Any = None) -> WindowJoin:
    """The operator behind ``topic.join(other, within=...)``: the join as an agent's input."""
    if isinstance(right, Table):
        raise TypeError(f"a stream-table join runs in the agent: `async for value, found in "
                        f"stream.join({right.name!r} table)`; topic.join() joins two topics within a time window")
    window = JoinWindows(within, before=before, after=after, grace=grace, close_idle_after=close_idle_after)
    return WindowJoin(left.app, left, right, window, how, name=name)
