"""Exactly-once producers: which transaction a record joins, and the transactions' life cycle.

``worker`` (EOS v2, confluent and memory): one transactional producer carries everything the
worker sends; the offsets go in with the consumer group's generation, so the broker refuses a
zombie's commit after a rebalance. ``partition`` (EOS v1, aiokafka): one producer per *task*,
i.e. partition p of the equally sized input topics — the range assignor always gives those to
one member, and they are what writes table partition p — so a task's outputs, its table
changelog and its offsets share one transaction, and the next owner's producer (same
transactional id) fences a zombie. Under v1, sends made outside any record (timers, web
views) go through a plain idempotent producer: they are tied to no input offset.

A transaction is always open between checkpoints; sends wait while one commits.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Hashable, cast

from ..transport.base import TP, Headers, Producer, retry_while_unreachable
from .event import processing
from .tasks import TaskShard

if TYPE_CHECKING:
    from ..transport.base import Driver

log = logging.getLogger("streamkit.transactions")

TransactionUnit = tuple[int, int]  # a transactional producer's share: (input partition count, partition number)
WORKER: TransactionUnit = (0, 0)  # the one unit of EOS v2


class TransactionalProducer(Producer, TaskShard):
    """The runtime's producer under exactly-once: routes each send into the right transaction.
    Its units are the tasks' (EOS v1) or the worker's (v2) share of it: the task manager opens,
    closes and reopens them at the tasks' moments."""

    def __init__(self, driver: "Driver", app_id: str, *, per_partition: bool, transactional_id: str,
                 partition_count: Callable[[str], int]) -> None:
        self.driver = driver
        self.app_id = app_id
        self.per_partition = per_partition
        self.transactional_id = transactional_id
        self.partition_count = partition_count
        self.units: dict[TransactionUnit, Producer] = {}
        # (source topic, partition) -> its unit and producer: a send's route without the partition
        # count and two lookups per record (EOS v1 only; cleared whenever ``units`` changes; the
        # partition counts are settled when the worker starts, before any record is read)
        self._routes: dict[tuple[str, int], tuple[TransactionUnit, Producer]] = {}
        self.plain: Producer | None = None
        self.dirty: set[TransactionUnit] = set()
        self._open = asyncio.Event()
        self._in_flight = 0
        self.orphans_dropped = 0  # outputs of records whose task this worker gave up (EOS v1)
        self.rollbacks: dict[TransactionUnit, int] = {}  # transactions rolled back, per unit
        self.rolled_back_dropped = 0  # sends held through their record's rollback (see send)

    def unit_of(self, tp: TP) -> TransactionUnit:
        return (self.partition_count(tp.topic), tp.partition) if self.per_partition else WORKER

    def rolled_back(self, task: TransactionUnit) -> None:
        """The unit's transaction was rolled back and its partitions go back to their committed
        offsets (the checkpoint calls this before it lets sends through again)."""
        self.rollbacks[task] = self.rollbacks.get(task, 0) + 1

    def unit_of_table(self, partitions: int, number: int) -> TransactionUnit:
        return (partitions, number) if self.per_partition else WORKER

    def unit_transactional_id(self, task: TransactionUnit) -> str:
        return f"{self.app_id}-task-{task[1]}of{task[0]}"

    # -- life cycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if self.per_partition:
            self.plain = self.driver.producer()
            await self.plain.start()
        else:
            await self._open_unit(WORKER, self.transactional_id)
        self._open.set()

    async def _open_unit(self, task: TransactionUnit, transactional_id: str) -> None:
        """Register the id (fencing any older producer that used it) and begin a transaction;
        a broker away meanwhile is waited out (a failed attempt's producer is closed first)."""
        producer = await retry_while_unreachable(lambda: self._started(transactional_id),
                                                 f"transactional producer {transactional_id!r}")
        self.units[task] = producer
        self._routes.clear()
        log.info("transactional producer %r ready", transactional_id)

    async def _started(self, transactional_id: str) -> Producer:
        producer = self.driver.producer(transactional_id=transactional_id)
        try:
            try:
                await producer.start()
            except AssertionError as exc:  # aiokafka, given metadata without brokers as one comes back
                raise ConnectionError(f"starting the producer: {exc!r}") from exc  # retriable: try again
            await producer.init_transactions()
            await producer.begin_transaction()
        except BaseException:
            try:
                await producer.stop()
            except Exception as exc:  # a client that never connected: nothing to flush
                log.debug("closing a producer that failed to start: %r", exc)
            raise
        return producer

    async def assigned(self, tps: list[TP]) -> None:
        """EOS v1: a producer per newly owned task, created before any of its records is read."""
        if not self.per_partition:
            return
        for task in sorted({self.unit_of(tp) for tp in tps} - set(self.units)):
            await self._open_unit(task, self.unit_transactional_id(task))

    def _drop_unit(self, task: TransactionUnit) -> Producer | None:
        """Take the unit's producer out of every route at once (before the caller awaits its
        close: a send meanwhile must not find it in the memo)."""
        producer = self.units.pop(task, None)
        self._routes.clear()
        self.dirty.discard(task)
        return producer

    async def close_units(self, tasks: set[TransactionUnit]) -> None:
        """Close the producers of tasks this worker gave up (their transactions are committed)."""
        for task in tasks:
            producer = self._drop_unit(task)
            if producer is not None:
                await _close_quietly(producer, abort=True)

    async def reopen(self, task: TransactionUnit) -> None:
        """After a fatal error (fenced): a new producer for the unit, when we still own it."""
        producer = self._drop_unit(task)
        if producer is not None:
            await _close_quietly(producer, abort=False)
        if task == WORKER and not self.per_partition:
            await self._open_unit(WORKER, self.transactional_id)

    async def renew(self, task: TransactionUnit) -> None:
        """Roll the unit's transaction back by replacing its producer: the new one registers the
        same transactional id, which aborts what the old one left open and fences it. After a
        broker outage a client's own abort can leave it unable to produce (librdkafka waiting
        for an epoch bump that never comes); a fresh producer has no such state. Only for the
        per-worker unit (EOS v2), whose id no other worker uses."""
        producer = self._drop_unit(task)
        if producer is not None:
            try:
                async with asyncio.timeout(5.0):  # wait_for may swallow a cancellation (3.11)
                    await producer.stop()
            except Exception as exc:  # a producer that cannot flush is being replaced anyway
                log.info("old transactional producer did not close cleanly: %r", exc)
        await retry_while_unreachable(lambda: self._open_unit(task, self.transactional_id), "init_transactions")

    # -- the tasks' moments (runtime/tasks.py) ----------------------------------------------------

    async def tasks_opening(self, tps: list[TP]) -> None:
        await self.assigned(tps)

    async def tasks_revoked(self, tps: list[TP], kept: set[TP]) -> None:
        """EOS v1: the producers of the tasks given up close (their transactions are committed
        or given up); a task keeping a partition keeps its producer."""
        if self.per_partition:
            await self.close_units({self.unit_of(tp) for tp in tps} - {self.unit_of(tp) for tp in kept})

    async def unit_fenced(self, unit: Hashable) -> None:
        await self.reopen(cast(TransactionUnit, unit))

    async def stop(self) -> None:
        for task in list(self.units):
            producer = self._drop_unit(task)
            if producer is not None:
                await _close_quietly(producer, abort=True)
        if self.plain is not None:
            await self.plain.stop()

    # -- sending --------------------------------------------------------------------------------

    def _route(self) -> tuple[TransactionUnit | None, Producer | None]:
        """The unit a send joins; (None, None) drops it: the output of a record whose task this
        worker gave up (fenced, revoked) while the record was in flight. Its offset is never
        committed here, so the new owner processes the record again; sending it outside any
        transaction would make it visible twice."""
        if not self.per_partition:
            return WORKER, self.units[WORKER]
        source = processing.get()
        if source is not None:
            where = (source.topic, source.partition)
            route = self._routes.get(where)
            if route is not None:
                return route
            task = (self.partition_count(where[0]), where[1])
            producer = self.units.get(task)
            if producer is not None:
                self._routes[where] = route = (task, producer)
                return route
            if not self.orphans_dropped:
                log.warning("outputs of records of %s[%d], a task this worker gave up, are dropped: "
                            "its new owner processes those records again", source.topic, source.partition)
            self.orphans_dropped += 1
            return None, None
        assert self.plain is not None
        return None, self.plain

    async def send(self, topic: str, key: bytes | None, value: bytes | None, *, partition: int | None = None,
                   headers: Headers | None = None, timestamp: int | None = None,
                   track: bool = True) -> asyncio.Future[Any] | None:
        if not self._open.is_set():  # a transaction is committing; the next one opens shortly
            source = processing.get()
            unit = self.unit_of(source) if source is not None else None  # an Event, or a dead letter's Message
            before = self.rollbacks.get(unit, 0) if unit is not None else 0
            await self._open.wait()
            if unit is not None and self.rollbacks.get(unit, 0) != before:
                # Its record's transaction was rolled back while this waited: the record is read
                # again from the committed offset and sends this again. Sent now, it would join
                # the next transaction and be committed twice.
                self.rolled_back_dropped += 1
                return _dropped()
        task, producer = self._route()
        if producer is None:
            return _dropped()
        if task is not None:
            self.dirty.add(task)
        self._in_flight += 1
        try:
            return await producer.send(topic, key, value, partition=partition, headers=headers,
                                       timestamp=timestamp, track=track)
        finally:
            self._in_flight -= 1

    def try_send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None,
                 headers: Headers | None = None, timestamp: int | None = None) -> bool:
        if not self._open.is_set():
            return False
        source = processing.get() if self.per_partition else None
        route = None if source is None else self._routes.get((source.topic, source.partition))
        task, producer = self._route() if route is None else route  # the hot path reads the memo inline
        if producer is None:
            return True  # dropped (see _route)
        if not producer.try_send(topic, key, value, partition, headers, timestamp):
            return False
        if task is not None:
            self.dirty.add(task)
        return True

    def producer_for(self, partitions: int, number: int) -> Producer:
        """Where a table partition's changelog records go: the transaction of its task."""
        task = self.unit_of_table(partitions, number)
        self.dirty.add(task)
        producer = self.units.get(task)
        if producer is None:  # a global table written from another task (documented limit of v1)
            task = next(iter(self.units))
            self.dirty.add(task)
            producer = self.units[task]
        return producer

    @asynccontextmanager
    async def sends_paused(self) -> AsyncIterator[None]:
        """Hold new sends (timers, web views) and let started ones finish, for the commit."""
        self._open.clear()
        try:
            while self._in_flight:
                await asyncio.sleep(0.001)
            yield
        finally:
            self._open.set()

    async def flush(self) -> None:
        for producer in list(self.units.values()):
            await producer.flush()
        if self.plain is not None:
            await self.plain.flush()

    async def partitions_for(self, topic: str) -> int:
        return await (self.plain or next(iter(self.units.values()))).partitions_for(topic)

    # -- committing -----------------------------------------------------------------------------

    async def commit(self, offsets: dict[TP, int], group: Any) -> dict[TransactionUnit, BaseException | None]:
        """Commit each unit that has offsets or sends; returns each unit's outcome (None = ok).

        A unit whose commit failed still has its transaction open (the caller aborts or drops it).
        """
        by_unit: dict[TransactionUnit, dict[TP, int]] = {}
        for tp, offset in offsets.items():
            by_unit.setdefault(self.unit_of(tp), {})[tp] = offset
        if self.plain is not None:
            try:
                await self.plain.flush()
            except Exception as exc:  # tied to no input offset: nothing to reprocess, say it loudly
                log.error("records sent outside any transaction (timers, web views) were lost: %s", exc)
        outcome: dict[TransactionUnit, BaseException | None] = {}
        for task in sorted(set(by_unit) | self.dirty):
            producer = self.units.get(task)
            if producer is None:
                continue  # offsets of a task given up meanwhile: its new owner reprocesses them
            try:
                # Every send of the transaction acknowledged first: a client may commit a
                # transaction one of whose batches failed (aiokafka does), losing that record.
                await producer.flush()
                if by_unit.get(task):
                    await producer.send_offsets_to_transaction(by_unit[task], group)
                await producer.commit_transaction()
                await producer.begin_transaction()
                outcome[task] = None
            except Exception as exc:
                outcome[task] = exc
            self.dirty.discard(task)
        return outcome

    async def abort(self, task: TransactionUnit) -> None:
        """Roll the unit's open transaction back and begin a new one."""
        producer = self.units[task]
        self.dirty.discard(task)
        await producer.abort_transaction()
        await producer.begin_transaction()


def _dropped() -> asyncio.Future[Any]:
    """A delivery that will never happen, reported as done (see TransactionalProducer._route)."""
    future = asyncio.get_running_loop().create_future()
    future.set_result((-1, -1))  # (partition, offset) of nothing
    return future


async def _close_quietly(producer: Producer, *, abort: bool) -> None:
    try:
        if abort:
            await producer.abort_transaction()
    except Exception:  # nothing open, or already fenced: closing is all that is left
        pass
    try:
        await producer.stop()
    except Exception as exc:
        log.warning("closing a transactional producer failed: %r", exc)
