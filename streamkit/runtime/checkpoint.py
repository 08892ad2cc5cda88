"""The commit protocol, in one place: at-least-once, and exactly-once on top of it.

At-least-once, every ``commit_interval`` and on every revoke and stop:
1. take, per partition, the offset up to which every subscriber has processed contiguously
   (never past an unprocessed record; records still queued hold the offset back);
2. snapshot the tables' write caches (same tick) and send one changelog record per changed key;
3. flush the producer, so the sink, changelog and DLQ records sent so far are all acknowledged
   (streams go on meanwhile, what they send and write is the next checkpoint's, until the
   tables' write caches and the snapshot being flushed hold ``table_cache_max_keys`` keys
   together): a flush waits for as long as the client keeps retrying (an outage is waited
   out), and every delivery's outcome is read, not only the first failure;
4. commit those offsets;
5. only then write the table batches (with their changelog offsets) to the stores.
A delivery that failed in 3 means some record's effects never reached Kafka, and nobody knows
which: the checkpoint waits until no record is mid-processing, drops every table change since
the last commit (the stores hold the committed state) and rewinds every partition to its last
committed offset, so the records are processed again and nothing is lost. A failed offset
commit (4) loses nothing (the outputs are in Kafka): the changes go back into the write
caches and the next checkpoint commits again.

Exactly-once (``ExactlyOnceCheckpoint``) makes 2-4 one Kafka transaction per unit (the worker,
or each task under EOS v1), and first stops every stream *between* records (the barrier), so
the table changes and outputs are exactly those of the records below the offsets. Every
delivery of a unit is checked before its transaction commits. A unit whose sends or commit
fail is aborted: its table partitions drop their uncommitted writes (the store holds the
committed state) and its input partitions are rewound to the last committed offsets. An abort
that cannot reach the broker is retried until it can; a fenced unit (or one whose abort fails
for good) is handed to the runtime, which drops its partitions and rejoins the group.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from ..errors import ProducerFenced, TransactionAborted
from ..transport.base import TP, Consumer, Producer, retry_while_unreachable
from .event import processing
from .router import Router

if TYPE_CHECKING:
    from .transactions import TransactionalProducer, TransactionUnit

log = logging.getLogger("streamkit.checkpoint")

BARRIER_WARN_AFTER = 10.0  # seconds a checkpoint waits for a record in progress before saying so
# At-least-once: how long a checkpoint lets records under way finish before it takes the table
# changes anyway (a change of a record still under way may then be restored and applied again).
ALO_QUIESCE_LIMIT = 0.1
# At-least-once: how often a checkpoint that lets streams go on through its flush looks at the
# tables' write caches (streams stop once they and the snapshot reach ``cache_limit`` keys).
CACHE_GUARD_SECONDS = 0.01
Rewind = Callable[[list[TP]], Awaitable[None]]


class Checkpoint:
    def __init__(self, router: Router, consumer: Consumer, producer: Producer, *, rewind: Rewind) -> None:
        self.router = router
        self.consumer = consumer
        self.producer = producer
        self._rewind = rewind
        self.partitions = router.partitions  # each one's committed and released offsets live there
        self.lock = asyncio.Lock()
        self.last_duration = 0.0
        self.observers: list[Any] = []  # called with each commit's duration (metrics)
        self.commits = 0
        self.rollbacks = 0  # checkpoints undone because a delivery (or transaction) failed
        self.guard_stops = 0  # flushes during which the write caches filled and streams waited
        self.participants: list[Any] = []  # table managers: prepare/send/apply/abort/discard
        self.scheduled: Any = None  # the app's ScheduledSends: queued before each flush (scheduled_sends.py)
        # Keys the tables' write caches and a snapshot being flushed may hold together before
        # streams wait for the flush (table_cache_max_keys); None: no bound.
        self.cache_limit: int | None = None

    def offsets_to_commit(self, tps: Iterable[TP] | None = None, *, changed_only: bool = True,
                          processed: dict[TP, int] | None = None) -> dict[TP, int]:
        """Step 1: contiguous progress per partition (by default only where it moved since the
        last commit; a fire-and-forget commit may have been lost, so revoke and stop re-send all).
        ``processed``: every partition's progress, already taken in this tick."""
        partitions = self.partitions
        for tp in self.consumer.take_failed_commits():  # a lost fire-and-forget commit: send it again
            partitions[tp].committed = None
        if processed is None:
            processed = self.processed(tps)
        elif tps is not None:
            processed = {tp: processed[tp] for tp in tps if tp in processed}
        if not changed_only:
            return dict(processed)
        return {tp: offset for tp, offset in processed.items() if partitions[tp].committed != offset}

    @property
    def committed(self) -> dict[TP, int]:
        """The offsets this worker last committed, per owned partition (a copy: for reading)."""
        return self.partitions.committed()

    @property
    def released(self) -> dict[TP, int]:
        """Partitions given up: the progress they had then (for the marks of table changes still
        to be flushed)."""
        return self.partitions.released()

    def processed(self, tps: Iterable[TP] | None = None) -> dict[TP, int]:
        """Per partition, the offset below which every subscriber is done with every record."""
        states = self.partitions if tps is None else [s for s in map(self.partitions.get, tps) if s is not None]
        offsets: dict[TP, int] = {}
        for state in states:
            offset = state.delivered
            if offset is None:
                continue
            tp = state.tp
            for subscriber in self.router.subscribers_of(tp.topic):
                first = subscriber.first_unprocessed(tp)
                if first is not None and first < offset:
                    offset = first
            offsets[tp] = offset
        return offsets

    def _producer_for(self, _partitions: int, _number: int) -> Producer:
        return self.producer

    async def _quiesce(self, limit: float | None = None) -> None:
        """Wait until no stream is in the middle of a record (a closed barrier keeps them out),
        or ``limit`` seconds."""
        loop = asyncio.get_running_loop()
        warn_at = loop.time() + BARRIER_WARN_AFTER
        give_up = None if limit is None else loop.time() + limit
        while True:
            holding = self.router.holding()
            if not holding or (give_up is not None and loop.time() >= give_up):
                return
            if loop.time() >= warn_at:
                warn_at = loop.time() + BARRIER_WARN_AFTER
                log.warning("checkpoint still waiting for %d record(s) in progress, e.g. %r",
                            len(holding), holding[0])
            await asyncio.sleep(0.001)

    async def commit(self, tps: Iterable[TP] | None = None, *, wait: bool = True) -> dict[TP, int]:
        """Run the protocol once; returns what was committed (``wait=False``: see Consumer.commit)."""
        async with self.lock:
            started = time.monotonic()
            # Streams stop between records while the tables' changes are taken (a record under
            # way may finish first, briefly), so the changes are those of the records below the
            # offsets (the checkpoint marks, tables/marks.py). Then they go on while the producer
            # flushes: the flush waits only for what was sent before it, and holding streams
            # through it held every record that arrived meanwhile for as long as the broker took
            # (the latency tail). What they write meanwhile goes into the write caches, so a
            # guard stops them once caches and snapshot reach the cache limit: unguarded, a
            # flush slowed by the streams going on let the caches of a 3M distinct-key run grow
            # to 270k keys and its RSS to 1,377 MB against 666
            # (docs/decisions/0005-checkpoint-streams-go-on-through-the-flush.md).
            barrier = self.router.barrier
            guard: asyncio.Task[None] | None = None
            if self.participants:
                barrier.close()
            try:
                if self.participants:
                    await self._quiesce(ALO_QUIESCE_LIMIT)
                processed = self.processed()  # once: the offsets and the marks of this tick
                offsets = self.offsets_to_commit(tps, changed_only=not wait, processed=processed)
                # Same tick as the offsets: the table changes that go with them (no await between).
                changes = [(p, p.prepare({**self.released, **processed})) for p in self.participants]
                if changes:
                    guard = self._guard_caches(sum(p.changed_keys(c) for p, c in changes))
                try:
                    try:
                        sent = [await p.send(c, self._producer_for) for p, c in changes]
                        if self.scheduled is not None:  # send_soon() without await, of records below the offsets
                            await self.scheduled.settle()
                        await self.producer.flush()  # what was sent up to here
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        barrier.close()  # the roll-back waits for the records in hand, and no more
                        await self._roll_back(exc)
                        raise
                    if guard is not None:
                        guard.cancel()  # flushed: nothing more to bound
                    barrier.open()
                    if offsets:
                        await self.consumer.commit(offsets, wait=wait)
                except BaseException:
                    for participant, c in changes:  # after a roll-back there is nothing left to restore
                        participant.abort(c)
                    raise
            finally:
                if guard is not None:
                    guard.cancel()
                barrier.open()
            for (participant, c), result in zip(changes, sent, strict=False):
                participant.apply(c, result)
            self._committed(offsets, started)
            return offsets

    def _guard_caches(self, snapshot: int) -> asyncio.Task[None] | None:
        """Open the barrier for the flush, and close it again once the write caches and the
        ``snapshot`` being flushed hold ``cache_limit`` keys (left closed if the snapshot alone
        does); returns the task that watches, if any."""
        limit = self.cache_limit
        if limit is not None and snapshot >= limit:
            return None  # streams wait for this flush
        self.router.barrier.open()
        if limit is None:
            return None
        return asyncio.create_task(self._close_at(limit - snapshot), name="streamkit-checkpoint-cache-guard")

    async def _close_at(self, room: int) -> None:
        while sum(p.cached_keys() for p in self.participants) < room:
            await asyncio.sleep(CACHE_GUARD_SECONDS)
        self.router.barrier.close()
        self.guard_stops += 1

    async def _roll_back(self, exc: BaseException) -> None:
        """A delivery failed: back to the last commit for every partition (module docstring)."""
        self.rollbacks += 1
        await self._quiesce()
        for participant in self.participants:
            participant.discard(lambda _partitions, _number: True)
        tps = self.router.reading()
        log.warning("a checkpoint's deliveries failed (%s): its %d partition(s) go back to their last "
                    "committed offsets and are processed again", exc, len(tps))
        await self._rewind(tps)

    def _committed(self, offsets: dict[TP, int], started: float) -> None:
        if offsets:
            partitions = self.partitions
            for tp, offset in offsets.items():
                partitions[tp].committed = offset
            self.commits += 1
        self.last_duration = time.monotonic() - started
        for observe in self.observers:
            observe(self.last_duration)

    def forget(self, tps: Iterable[TP]) -> None:
        """Released partitions: their last position stays known for the marks of table changes
        still to be flushed (the final checkpoint of a stopping worker; ``released`` joins the
        processed offsets in every at-least-once checkpoint's marks)."""
        tps = list(tps)
        processed = self.processed(tps)
        for state in self.partitions.each(tps):
            state.release(processed.get(state.tp))



class ExactlyOnceCheckpoint(Checkpoint):
    """Transactions instead of offset commits; see the module docstring."""

    def __init__(self, router: Router, consumer: Consumer, txns: "TransactionalProducer", *,
                 rewind: Rewind, fenced: Callable[["TransactionUnit"], Awaitable[None]]) -> None:
        super().__init__(router, consumer, txns, rewind=rewind)
        self.txns = txns
        self._fenced = fenced
        self.aborts = 0

    async def commit(self, tps: Iterable[TP] | None = None, *, wait: bool = True) -> dict[TP, int]:
        """Commit everything processed so far (a transaction covers all partitions of its unit)."""
        async with self.lock:
            started = time.monotonic()
            barrier = self.router.barrier
            barrier.close()
            try:
                await self._quiesce()
                unsent = await self._settle_scheduled()
                offsets = self.offsets_to_commit()
                await self._send_dead_letters(offsets)
                changes = [(p, p.prepare()) for p in self.participants]
                if not offsets and not self.txns.dirty and not any(c for _, c in changes) and unsent is None:
                    return {}
                # Sends (timers, web views, a record's send still in a client's retry) wait until
                # the commit, or the abort and rewind of a failed one, is over: a send into a
                # transaction being aborted fails, or joins the next one without its offsets.
                async with self.txns.sends_paused():
                    outcome, sent = await self._commit_units(offsets, changes, unsent)
                    failed = {task: exc for task, exc in outcome.items() if exc is not None}
                    for (participant, c), result in zip(changes, sent, strict=False):
                        participant.apply(c, result, keep=lambda n, p: self.txns.unit_of_table(n, p) not in failed)
                    done = {tp: o for tp, o in offsets.items() if self.txns.unit_of(tp) not in failed}
                    self._committed(done, started)
                    for task, exc in failed.items():
                        await self._failed(task, exc)
                if failed:
                    raise TransactionAborted(f"{len(failed)} transaction(s) rolled back: "
                                             + "; ".join(f"{exc}" for exc in failed.values()))
                return done
            finally:
                barrier.open()

    async def _send_dead_letters(self, offsets: dict[TP, int]) -> None:
        """The held dead letters of records below ``offsets``, into the transactions that commit
        those offsets (each joins its record's unit: ``processing`` is its record)."""
        held = self.router.held_letters
        if not held:
            return
        for message, letter in held.due(offsets):
            token = processing.set(message)
            try:
                await self.router.errors.send(letter)
            finally:
                processing.reset(token)

    async def _settle_scheduled(self) -> BaseException | None:
        """The records' ``send_soon()`` calls without await, queued into their transactions;
        the error of one that failed (every unit then rolls back), else None."""
        if self.scheduled is None:
            return None
        try:
            await self.scheduled.settle()
        except Exception as exc:
            return exc
        return None

    async def _commit_units(self, offsets: dict[TP, int], changes: list[tuple[Any, Any]],
                            unsent: BaseException | None = None
                            ) -> tuple[dict["TransactionUnit", BaseException | None], list[Any]]:
        """Changelog records into each unit's transaction, then offsets and commit per unit."""
        sent: list[Any] = []
        try:
            if unsent is not None:
                raise unsent
            for participant, c in changes:
                sent.append(await participant.send(c, self.txns.producer_for))
        except Exception as exc:  # nothing of this checkpoint may commit without its changelog
            failed: dict["TransactionUnit", BaseException | None] = {t: exc for t in set(self.txns.units) | self.txns.dirty}
            return failed, [{} for _ in changes]
        group = self.consumer.group_metadata() if offsets else None
        return await self.txns.commit(offsets, group), sent

    async def _failed(self, task: "TransactionUnit", exc: BaseException) -> None:
        self.aborts += 1
        self.rollbacks += 1
        self.txns.rolled_back(task)  # sends held meanwhile by records of the unit: dropped
        for participant in self.participants:  # the stores hold the committed state
            participant.discard(lambda n, p: self.txns.unit_of_table(n, p) == task)
        if not isinstance(exc, ProducerFenced):
            log.warning("transaction rolled back, its records will be processed again: %s", exc)
            try:
                if self.txns.per_partition:
                    await retry_while_unreachable(lambda: self.txns.abort(task), "abort_transaction")
                else:  # a fresh producer: no client state left over from the failure (renew)
                    await self.txns.renew(task)
            except ProducerFenced as abort_exc:
                log.warning("fenced while aborting (%s): dropping the partitions", abort_exc)
            except Exception as abort_exc:
                log.warning("abort failed too (%r): dropping the partitions", abort_exc)
            else:
                await self._rewind([tp for tp in self.router.reading() if self.txns.unit_of(tp) == task])
                return
        await self._fenced(task)
