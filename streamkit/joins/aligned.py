"""Time-aligned reading for windowed joins: a join's two partitions of one number are read in
timestamp order, as Kafka Streams picks a task's next record across its partitions.

Without it, a join catching up on two filled topics (a restart after downtime, a reprocessing,
a new app on old data) reads whole batches of one side before the other: the stream time runs
ahead on the first, and the second's records arrive behind it, late, dropped. So the join keeps
each partition's delivered batches apart and hands out the earliest head of the two sides. When
one side has nothing delivered, it waits while that side is known to have more (its high
watermark, as the last fetch reported it, lies past what was delivered; Kafka Streams'
``max.task.idle.ms=0``, KIP-695, which waits as long as the lag lasts), until ``WAIT_CAP``
seconds have passed *and* the worker's consume loop has fetched ``WAIT_ROUNDS`` times meanwhile
without them: a last resort, not a latency budget. At 2 s of the clock alone, waits ran out on
a starved machine (a fifth of the CPU stolen) where aiokafka brought a resumed partition's
records 2-3 s later, letting thousands of records go out unpaired, late, dropped (8,503 of
200,000 pairs in a benchmark run); and while the loop does not run at all (a long checkpoint,
an agent holding the event loop) the other side cannot come however long the wait. Records of
one partition keep their order; the offsets committed are still each partition's processed
prefix.

Holding records here drains the router's bounded inbox, so the inbox no longer holds the
consumer back: a client that delivers one side far ahead of the other (librdkafka catching up)
would fill memory, or, with a cap, push records out unpaired and the other side in late. So a
partition holding ``PAUSE_AT`` records is paused at the consumer (Kafka Streams'
``buffered.records.per.partition``) and resumed at half that; ``HOLD_CAP`` per partition is the
last resort for what a client still delivers after the pause.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..runtime.tasks import TableSelection, TaskShard
from ..transport.base import TP

if TYPE_CHECKING:
    from ..runtime.context import ProcessingContext
    from ..runtime.inbox import Batch
    from ..runtime.pauses import PauseLedger

WAIT_CAP = 10.0  # seconds one side waits for the other's known records, at least...
WAIT_ROUNDS = 5  # ...and fetches of the worker's consume loop meanwhile that did not bring them
RECHECK = 0.05  # seconds before a wait past WAIT_CAP asks again whether the loop fetched
PAUSE_AT = 5_000  # records held for one partition before it is paused (resumed at half)
HOLD_CAP = 50_000  # records held for one partition before its earliest go out without waiting


@dataclass
class AlignmentCounters:
    """What a join's readers did to keep its two sides in time order; a record handed out
    unaligned may make the other side's records late."""

    held_full: int = 0  # handed out unpaired: its partition held HOLD_CAP records
    waited: int = 0  # handed out unpaired: the other side's known records did not come in WAIT_CAP
    pauses: int = 0  # times a partition was paused holding PAUSE_AT records

    @property
    def unaligned(self) -> int:
        return self.held_full + self.waited


class TimeAligner(TaskShard):
    """The delivered, unprocessed batches of a join's partitions, picked by timestamp. Its state
    of a partition goes with the partition's task (registered with the task manager): kept, a
    side found caught up before a revocation would be taken as caught up when it came back."""

    def __init__(self, left: str, right: str, context: ProcessingContext, counters: AlignmentCounters,
                 reason: str) -> None:
        self.partner = {left: right, right: left}
        self.side = {left: 0, right: 1}  # equal timestamps: the left record first
        self.context = context  # the worker: its consumer, pauses, positions
        self.counters = counters
        self.queues: dict[TP, deque[list[Any]]] = {}  # tp -> [batch, next index] entries
        self.held: dict[TP, int] = {}  # records held per partition
        self.waiting_since: dict[TP, tuple[float, int]] = {}  # partner -> (time, fetch round)
        self.settled: dict[TP, int] = {}  # high watermark at which a side was found caught up
        self.probed: dict[TP, tuple[int, int | None]] = {}  # (high, delivered) its position was asked at
        self.answered: dict[TP, tuple[int, int, int]] = {}  # (high, position, fetch round) of a probe at the end
        self.asked = False  # a position was asked (awaited) while picking
        self.reason = reason  # this join's name in the pause ledger
        if self.pauses is not None:
            self.pauses.release_all(reason)  # a restarted agent's stream starts over: so do its pauses
        if context.running:
            context.register_task_shard(self)  # its partitions' state goes with their tasks

    @property
    def pauses(self) -> PauseLedger | None:
        """The worker's pause ledger (made with its consumer, which may come after this stream)."""
        return self.context.pauses

    def add(self, batch: "Batch") -> None:
        if batch.revoked or not batch.events:
            return
        tp = batch.tp
        self.queues.setdefault(tp, deque()).append([batch, 0])
        held = self.held[tp] = self.held.get(tp, 0) + len(batch.events)
        self.waiting_since.pop(tp, None)
        pauses = self.pauses
        if held >= PAUSE_AT and pauses is not None and not pauses.holds(self.reason, tp):
            pauses.hold(self.reason, [tp])
            self.counters.pauses += 1

    # -- the tasks' moments (runtime/tasks.py) ----------------------------------------------------

    async def tasks_revoked(self, tps: list[TP], kept: set[TP]) -> None:
        self.forget(tps)

    def tasks_fenced(self, tps: list[TP], tables: TableSelection) -> None:
        self.forget(tps)

    def tasks_rewound(self, tps: list[TP]) -> None:
        self.forget(tps)

    def forget(self, tps: list[TP]) -> None:
        """Drop what is held of ``tps`` and what was learnt of them (given up: their records are
        read again, from the committed offsets, by whoever owns them next)."""
        for tp in tps:
            self.queues.pop(tp, None)
            self.held.pop(tp, None)
            for known in (self.waiting_since, self.settled, self.probed, self.answered):
                known.pop(tp, None)
        pauses = self.pauses
        if pauses is not None:
            held = [tp for tp in tps if pauses.holds(self.reason, tp)]
            if held:
                pauses.release(self.reason, held)

    def _less(self, tp: TP, count: int) -> None:
        held = self.held.get(tp)
        if held is None:
            return  # forgotten while a pick awaited the consumer (see forget)
        held = self.held[tp] = held - count
        if held > PAUSE_AT // 2:  # per record: the common case asks nothing of the ledger
            return
        pauses = self.pauses
        if pauses is not None and pauses.holds(self.reason, tp):
            pauses.release(self.reason, [tp])

    def _head(self, tp: TP) -> list[Any] | None:
        queue = self.queues.get(tp)
        while queue:
            entry = queue[0]
            batch, idx = entry
            if not batch.revoked and idx < len(batch.events):
                return entry
            if batch.revoked:  # revoked or rewound: the router delivers them again
                self._less(tp, len(batch.events) - idx)
            queue.popleft()
        return None

    def _take(self, entry: list[Any]) -> tuple["Batch", int]:
        batch, idx = entry
        entry[1] = idx + 1
        self._less(batch.tp, 1)
        return batch, idx

    async def pick(self, now: float) -> tuple["Batch", int] | float | None:
        """The next ``(batch, index)`` to hand out; else the seconds to wait for a batch before
        asking again (None: nothing is held, wait for one)."""
        wait: float | None = None
        for tp in list(self.queues):
            entry = self._head(tp)
            if entry is None:
                continue
            partner = TP(self.partner[tp.topic], tp.partition)
            other = self._head(partner)
            if other is not None:
                mine = (entry[0].events[entry[1]].timestamp or 0, self.side[tp.topic])
                theirs = (other[0].events[other[1]].timestamp or 0, self.side[partner.topic])
                if mine < theirs:
                    return self._take(entry)
                continue  # the partner's head is earlier: it goes out in its turn
            remaining = await self._wait_for(tp, partner, now)
            if remaining <= 0:
                return self._take(entry)
            if self.asked:  # it awaited the consumer: what the router delivered meanwhile is in the
                self.asked = False  # stream's inbox, not here yet; look there before picking again
                return 0.0
            wait = remaining if wait is None else min(wait, remaining)
        return wait

    async def _wait_for(self, tp: TP, partner: TP, now: float) -> float:
        """How much longer ``tp``'s head waits for ``partner``'s records (<= 0: not at all)."""
        context = self.context
        if self.held[tp] >= HOLD_CAP:
            self.counters.held_full += 1
            return 0.0
        consumer = context.consumer
        if consumer is None or partner not in context.assigned:
            return 0.0
        high = consumer.highwater(partner)
        delivered = context.delivered_to(partner)
        if high is not None and (self.settled.get(partner) == high or (delivered is not None and high <= delivered)):
            return 0.0
        since, rounds = self.waiting_since.setdefault(partner, (now, context.fetch_rounds))
        remaining = since + WAIT_CAP - now
        if remaining > 0 and high is not None and self.probed.get(partner) != (high, delivered):
            # transaction markers (or aborted records) may be all that lies past the delivered
            # records: the consumer's position, past them, tells (asked once per state)
            self.probed[partner] = (high, delivered)
            position = await consumer.position(partner)
            self.asked = True
            if self.probed.get(partner) != (high, delivered):
                pass  # forgotten meanwhile (revoked, fenced): the answer is of an ownership that is over
            elif position is not None and position >= high:
                self.answered[partner] = (high, position, context.fetch_rounds)
            else:
                self.answered.pop(partner, None)
        answer = self.answered.get(partner)
        if answer is not None and answer[0] == high:
            # the records the client had handed out when it answered may still be on their way to
            # the router: they are delivered once the consume loop has gone round since
            if context.fetch_rounds <= answer[2]:
                return RECHECK
            delivered = context.delivered_to(partner)
            if delivered is None or answer[1] - delivered <= 1:
                self.settled[partner] = high
                return 0.0
        if remaining <= 0:
            if context.fetch_rounds - rounds < WAIT_ROUNDS:
                return RECHECK  # the consumer has not had its chances to bring them yet
            self.counters.waited += 1
        return remaining
