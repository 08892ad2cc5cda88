"""Replaying changelogs into stores: active recovery (bounded) and standby/global tailing.

Records are applied as raw bytes, one store batch per fetched batch, each batch recording the
changelog offset it reached, so an interrupted recovery resumes where it stopped. Batches are
fetched as columns (offsets, keys, values: transport/columns.py) and applied a run at a time;
the next fetch is started before a batch is applied (``_Replay``), so a driver that fetches on a
thread (confluent) overlaps the two.
Each value is checked first (``BadValues``): one the table cannot decode (written to the
changelog by something else) is not applied but handed to the error policy with its table and
offset, instead of failing later, when some agent reads that key. Each batch's keys are checked
before anything of it is applied (``CheckFormat``): records of another framework that this table
would misread (faust_changelogs.py) stop the restore with the error the check raises.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Sequence

from ..transport.base import TP, Consumer, Driver, Message, retry_while_unreachable
from ..transport.columns import Columns
from ..transport.reader import read_forever
from .marks import MARK_KEY, MarkedBlocks, cut, is_mark, put_all
from .stores import Store

log = logging.getLogger("streamkit.recovery")


@dataclass
class RecoveryProgress:
    """What readiness, metrics and the log report while a recovery runs."""

    total: int = 0
    done: int = 0
    started: float = 0.0
    active: bool = False
    partitions: int = 0
    per_partition: dict[TP, list[int]] = field(default_factory=dict)  # changelog -> [done, total]

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 and self.total >= self.done else None

    def line(self) -> str:
        eta = self.eta
        return (f"recovery: {self.done}/{self.total} records from {self.partitions} changelog partitions, "
                f"{self.rate:,.0f}/s, ETA {eta:.1f}s" if eta is not None else
                f"recovery: {self.done}/{self.total} records, {self.rate:,.0f}/s")


# The values of one fetched batch a table cannot decode: (index, problem) each (the rest apply).
BadValues = Callable[[TP, Sequence["bytes | None"]], "list[tuple[int, BaseException]]"]
# What happens to a record BadValues named (the error policy).
OnBad = Callable[[TP, Message, BaseException], Awaitable[None]]
# Raises if a fetched batch holds records this table would misread (faust_changelogs.py).
CheckFormat = Callable[[TP, Columns], None]


async def _apply(store: Store, tp: TP, columns: Columns, bad_values: BadValues | None, on_bad: OnBad | None,
                 blocks: MarkedBlocks | None = None, check: CheckFormat | None = None) -> None:
    """Apply one fetched batch to ``store``; with ``blocks`` (at-least-once tables), a
    checkpoint block at a time (marks.py), else every record as it comes (marks skipped).
    The runs between marks go in whole (dict updates); a batch with a value the table cannot
    read goes record by record (``_apply_one_by_one``, the reference the bulk path matches)."""
    if check is not None:
        check(tp, columns)
    keys, values, offsets = columns.keys, columns.values, columns.offsets
    marks = [i for i, key in enumerate(keys) if key == MARK_KEY and is_mark(columns.message(i))] \
        if MARK_KEY in keys else []
    if bad_values is not None:
        if marks:  # a mark's value is no table value
            checked = list(values)
            for i in marks:
                checked[i] = None
        problems = bad_values(tp, checked if marks else values)
        if problems:
            await _apply_one_by_one(store, tp, columns, dict(problems), marks, on_bad, blocks)
            return
    batch: dict[bytes, bytes | None] = {}
    offset: int | None = None
    sources: bytes | None = None
    start, count = 0, len(offsets)
    for i in (*marks, count):
        if i > start:  # records start..i-1, none a mark
            if blocks is None:
                put_all(batch, cut(keys, start, i), cut(values, start, i))
            else:
                blocks.feed_run(columns, start, i, batch)
            if blocks is None or not blocks.marked:
                offset = offsets[i - 1]
        if i < count:  # a mark
            offset = offsets[i]  # a dropped block is passed over too: its keys are repaired
            if blocks is not None:
                sources = blocks.feed_fields(offsets[i], keys[i], values[i], True, batch) or sources
        start = i + 1
    if batch or offset is not None:
        store.apply(batch, offset, sources)


async def _apply_one_by_one(store: Store, tp: TP, columns: Columns, problems: dict[int, BaseException],
                            marks: list[int], on_bad: OnBad | None, blocks: MarkedBlocks | None = None) -> None:
    """``_apply`` a record at a time: the values in ``problems`` go to the error policy, not
    into the store."""
    batch: dict[bytes, bytes | None] = {}
    offset: int | None = None
    sources: bytes | None = None
    feed = blocks.feed_fields if blocks is not None else None
    is_mark_at = set(marks)
    for i, (record_offset, key, value) in enumerate(zip(columns.offsets, columns.keys, columns.values, strict=True)):
        mark = i in is_mark_at
        problem = problems.get(i)
        if problem is not None:
            if on_bad is not None:
                await on_bad(tp, columns.message(i), problem)
            if blocks is None or not blocks.marked:
                offset = record_offset
            continue
        if feed is None:
            if not mark:
                batch[key or b""] = value
            continue
        assert blocks is not None
        released = feed(record_offset, key, value, mark, batch)
        if mark:
            offset = record_offset  # a dropped block is passed over too: its keys are repaired
            sources = released or sources
        elif not blocks.marked:
            offset = record_offset
    if feed is None and columns.offsets:
        offset = columns.offsets[-1]  # every record was applied or handed to the error policy
    if batch or offset is not None:
        store.apply(batch, offset, sources)


async def replay(driver: Driver, stores: dict[TP, Store], progress: RecoveryProgress,
                 on_done: Callable[[TP], None] | None = None, bad_values: BadValues | None = None,
                 on_bad: OnBad | None = None, report_every: float = 3.0,
                 settle: float = 0.3, idle_limit: float = 3.0,
                 blocks: dict[TP, MarkedBlocks] | None = None, check: CheckFormat | None = None) -> int:
    """Bring each store up to its changelog's end; returns records applied. The changelogs in
    ``blocks`` are applied a checkpoint block at a time (marks.py); at the end, a block no mark
    closed is dropped (its keys are in ``blocks[tp].dropped``, to be repaired).

    Each partition is done on its own (``on_done(tp)``, so its task can start processing while
    bigger ones still restore), when its position (which passes transaction markers) reaches
    the end offset taken now and the end the fetch responses report (some brokers, the dev
    broker among them, under-report the first). Offsets decide, except in two cases a client
    cannot tell apart by offsets: a high watermark past what read_committed may read (an open
    transaction, or records still on their way; confluent reports no last stable offset) ends
    the partition once it is ``settle`` seconds quiet; a client that reports no end at all
    ends it when the whole replay consumer is ``idle_limit`` seconds quiet.
    """
    if not stores:
        return 0
    consumer = driver.changelog_reader()
    await consumer.start()
    try:
        tps = list(stores)
        # an outage as the restore begins is waited out (it halted the worker: chaos, outage10)
        ends = await retry_while_unreachable(lambda: consumer.end_offsets(tps), "changelog end offsets")
        starts = {tp: (offset + 1 if (offset := stores[tp].offset) is not None else 0) for tp in tps}
        progress.total += sum(max(0, ends[tp] - starts[tp]) for tp in tps)
        for tp in tps:
            progress.per_partition[tp] = [0, max(0, ends[tp] - starts[tp])]
        progress.partitions += len(tps)
        await consumer.assign(tps, starts)
        run = _Replay(consumer, stores, progress, ends, starts, bad_values, on_bad, blocks or {},
                      settle, idle_limit, check)
        try:
            await run.until_done(on_done, report_every)
        finally:
            await run.drop_fetch_ahead()
        return run.applied
    finally:
        await consumer.stop()


class _Replay:
    """One ``replay``'s state: where each changelog partition is, which are still pending, and
    the next fetch, started while the batch before is applied (a driver that fetches on a
    thread, confluent, fills it meanwhile)."""

    def __init__(self, consumer: Consumer, stores: dict[TP, Store], progress: RecoveryProgress,
                 ends: dict[TP, int], starts: dict[TP, int], bad_values: BadValues | None,
                 on_bad: OnBad | None, blocks: dict[TP, MarkedBlocks], settle: float, idle_limit: float,
                 check: CheckFormat | None = None) -> None:
        self.consumer = consumer
        self.stores = stores
        self.progress = progress
        self.ends = ends
        self.positions = dict(starts)
        self.bad_values = bad_values
        self.on_bad = on_bad
        self.blocks = blocks
        self.check = check
        self.settle = settle
        self.idle_limit = idle_limit
        self.pending = set(stores)
        started = time.monotonic()
        self.last_data = dict.fromkeys(stores, started)  # when each partition last returned records
        self.last_any = started  # when any partition last returned records
        self.applied = 0
        self.ahead: asyncio.Future | None = None

    def _fetch(self) -> "asyncio.Future[dict[TP, Columns]]":
        return asyncio.ensure_future(self.consumer.getmany_columns(0.1, 10000))

    async def until_done(self, on_done: Callable[[TP], None] | None, report_every: float) -> None:
        last_report = time.monotonic()
        while self.pending:
            batches = await (self.ahead or self._fetch())
            self.ahead = self._fetch()
            now = time.monotonic()
            await self._take(batches, now)
            for tp in sorted(self.pending):
                if batches.get(tp) and self.positions[tp] < self.ends[tp]:
                    continue  # still delivering: no need to ask where it ends
                if await self._caught_up(tp, now):
                    self.pending.discard(tp)
                    self.consumer.pause([tp])
                    if tp in self.blocks:
                        self.blocks[tp].drop()  # written by a checkpoint that never got to its mark
                    if on_done is not None:
                        on_done(tp)
            if now - last_report >= report_every:
                last_report = now
                _report(self.progress)
            await asyncio.sleep(0)

    async def _take(self, batches: dict[TP, Columns], now: float) -> None:
        for tp, columns in batches.items():
            count = len(columns)
            if count and tp in self.pending:  # (a partition done meanwhile may have been fetched ahead)
                await _apply(self.stores[tp], tp, columns, self.bad_values, self.on_bad, self.blocks.get(tp),
                             self.check)
                self.positions[tp] = columns.offsets[-1] + 1
                self.applied += count
                self.progress.done += count
                self.progress.per_partition[tp][0] += count
                self.last_data[tp] = self.last_any = now

    async def _caught_up(self, tp: TP, now: float) -> bool:
        fetched, exact = self.consumer.fetched_end(tp)
        if fetched is None:
            return now - self.last_any >= self.idle_limit  # the whole consumer quiet: one partition
            # can wait seconds for its turn while others deliver
        target = max(self.ends[tp], fetched)
        if self.positions[tp] < target:  # a log ending in transaction markers: the position passes them
            if self.ahead is not None:  # the client's position counts records fetched ahead: apply them first
                ahead, self.ahead = self.ahead, None
                await self._take(await ahead, now)
            if self.positions[tp] < target:
                self.positions[tp] = max(self.positions[tp], await self.consumer.position(tp) or 0)
        if self.positions[tp] >= target:
            return True
        return not exact and self.positions[tp] >= self.ends[tp] and now - self.last_data[tp] >= self.settle

    async def drop_fetch_ahead(self) -> None:
        """Before the client stops: a fetch left running would race its close."""
        if self.ahead is not None:
            self.ahead.cancel()
            await asyncio.gather(self.ahead, return_exceptions=True)
            self.ahead = None


def _report(progress: RecoveryProgress) -> None:
    line = progress.line()
    log.info(line)
    if sys.stderr.isatty():  # a live progress line for a worker run in a terminal
        sys.stderr.write(f"\r{line}\x1b[K")
        sys.stderr.flush()


TAILER_BACKOFF = (1.0, 30.0)  # seconds before a failed tailer restarts: first, at most


class Tailer:
    """Keeps stores current from their changelogs: standby replicas and global tables.

    Supervised: if it fails (a store that cannot be written, a client error), the failure is
    logged with its cause, counted (``failures``, in /metrics) and the tailer restarts from the
    stores' offsets after a growing pause; a dead tailer would leave a GlobalTable silently stale.
    """

    def __init__(self, driver: Driver, bad_values: BadValues | None = None, on_bad: OnBad | None = None,
                 check: CheckFormat | None = None) -> None:
        self.driver = driver
        self.check = check
        self.bad_values = bad_values
        self.on_bad = on_bad
        self.stores: dict[TP, Store] = {}
        self.blocks: dict[TP, MarkedBlocks] = {}
        self.applied = 0
        self.applied_to: set[TP] = set()  # every partition it applied records to (a standby's: tables/manager.py)
        self.failures = 0
        self.last_error: BaseException | None = None
        self._task: asyncio.Task | None = None

    async def restart(self, stores: dict[TP, Store], marked: set[TP] = frozenset()) -> None:  # type: ignore[assignment]
        """Tail ``stores``; those in ``marked`` (at-least-once tables) a checkpoint block at a
        time, each applied at its mark (a standby cannot know the commit; promotion checks)."""
        await self.stop()
        self.stores = dict(stores)
        self.blocks = {tp: MarkedBlocks(lambda _offsets: True, marked=stores[tp].sources is not None,
                                        after=stores[tp].offset) for tp in marked if tp in stores}
        if self.stores:
            self._task = asyncio.create_task(self._supervise(), name="streamkit-changelog-tailer")

    async def _supervise(self) -> None:
        pause = TAILER_BACKOFF[0]
        while True:
            try:
                await self._run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                self.last_error = exc
                log.error("changelog tailer (standbys, global tables) failed; restarting in %.0fs: %r",
                          pause, exc, exc_info=exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, TAILER_BACKOFF[1])

    async def _run(self) -> None:
        consumer = self.driver.changelog_reader()
        await consumer.start()
        try:
            starts = {tp: (s.offset + 1 if s.offset is not None else 0) for tp, s in self.stores.items()}
            await consumer.assign(list(self.stores), starts)
            await read_forever(consumer, self._on_records, name="changelog tailer", fetch=consumer.getmany_columns)
        finally:
            await consumer.stop()

    async def _on_records(self, tp: TP, columns: Columns) -> None:
        store = self.stores.get(tp)
        if store is not None:
            await _apply(store, tp, columns, self.bad_values, self.on_bad, self.blocks.get(tp), self.check)
            self.applied += len(columns)
            self.applied_to.add(tp)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
