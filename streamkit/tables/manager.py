"""Table partitions over a worker's life: assignment → recovery → serving → release.

Table partition p lives with partition p of the source topics (the range assignor places the
same-numbered partitions of equally sized topics on one member). On assignment the sources'
partitions are paused until their tables are recovered; releasing a partition closes its store
unless it stays as a standby. Also the checkpoint participant that writes changelogs.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..errors import StoreWriteFailed
from ..runtime.dead_letters import dead_letter_headers
from ..runtime.loops import halting
from ..runtime.tasks import TableSelection, TaskShard
from ..transport.base import TP, Message, Producer, delivery_position, retry_while_unreachable
from .faust_changelogs import ChangelogChecks
from .marks import MARK_HEADERS, MARK_KEY, OPENING_MARK, MarkedBlocks, committed_covers, mark_offsets, mark_value
from .recovery import RecoveryProgress, Tailer, replay
from .rocks_options import RocksTuning
from .stores import MemoryStore, Store, open_store
from .table import Table, TablePartition

if TYPE_CHECKING:
    from ..runtime.context import ProcessingContext
    from ..transport import Driver
    from ..types.app import AppProtocol

log = logging.getLogger("streamkit.tables")

# (table, partition, changelog batch, the checkpoint mark ending it under at-least-once)
Changes = list[tuple[Table, int, dict[bytes, bytes | None], bytes | None]]


class TableManager(TaskShard):
    """The worker's table partitions: the tasks' table shards (the task manager drives them at
    the tasks' moments: ``rebalanced``, ``tasks_lost``, ``tasks_fenced``), the standbys and the
    global tables, and the checkpoint participant that writes their changelogs."""

    def __init__(self, app: "AppProtocol", context: "ProcessingContext", driver: "Driver",
                 tables: Iterable[Table]) -> None:
        self.app = app
        self.context = context  # the worker: its consumer, pauses, error policy, halting
        self.driver = driver
        self.tables = list(tables)
        self._by_changelog = {t.changelog.name: t for t in self.tables}
        self._by_name = {t.name: t for t in self.tables}
        self.membership: Any = None  # runtime/membership.Membership: standby placement
        self.stores: dict[tuple[str, int], Store] = {}
        self.rocks_memory = RocksTuning.from_settings(self.app.conf.rocksdb_options).shared()
        self.progress = RecoveryProgress()
        self.check_changelog = ChangelogChecks(self.tables)  # records another framework wrote: refused
        self.tailer = Tailer(driver, self.bad_values, self.bad_changelog_record, self.check_changelog)
        self._recovering: asyncio.Task | None = None
        self._placement_stale = False  # membership changed while a recovery ran
        # on_window_close calls of windows emitted at a checkpoint: run once it committed, outside
        # it (a callback that sends would wait for the commit that waits for it)
        self._window_callbacks: list[tuple[Any, int, Any, Any, Any]] = []
        self._callbacks_running: asyncio.Task | None = None
        self._retailing = asyncio.Lock()  # one placement at a time: each reads the claims it acts on
        self._generation = 0
        self._assigned: set[TP] = set()
        self.replayed_total = 0
        self.blocks_dropped = 0  # changelog blocks of uncommitted checkpoints dropped at recovery
        self.stores_reset = 0  # stores found ahead of the committed offsets, restored anew
        self.on_serving: list[Any] = []  # async callbacks({table: [partitions]}) after each change
        self.on_resumed: list[Callable[[list[TP]], None]] = []  # source partitions whose tables caught up

    async def announce(self) -> None:
        """Tell listeners (the web cluster) which table partitions this worker serves now."""
        serving = {t.name: sorted(n for n, p in t.local.items() if p.ready) for t in self.tables if not t.is_global}
        for callback in self.on_serving:
            try:
                await callback(serving)
            except Exception as exc:
                log.warning("announcing table partitions failed: %r", exc)

    @property
    def ready(self) -> bool:
        return not self.progress.active

    # -- changelog records nobody can read ------------------------------------------------------

    def bad_values(self, tp: TP, values: Sequence[bytes | None]) -> list[tuple[int, BaseException]]:
        """The values of changelog ``tp`` its table cannot decode, by index (recovery applies
        only the others)."""
        table = self._by_changelog.get(tp.topic)
        return [] if table is None else table.entries.bad_values(values)

    async def bad_changelog_record(self, tp: TP, message: Message, problem: BaseException) -> None:
        table = self._by_changelog[tp.topic]
        assert self.context.errors is not None  # the worker that made this manager runs
        await self.context.errors.handle(f"table {table.name!r} changelog (not applied)", message, problem)

    # -- stores ---------------------------------------------------------------------------------

    def _store(self, table: Table, number: int) -> Store:
        key = (table.name, number)
        store = self.stores.get(key)
        if store is None:
            conf = self.app.conf
            try:
                store = open_store(table.store_url, conf.data_dir, self.app.id, table.name, number, self.rocks_memory)
            except Exception as exc:  # a full disk or an unwritable directory: as a failed write
                raise StoreWriteFailed(
                    f"table {table.name!r} partition {number}: writing the store under {conf.data_dir!r} failed as "
                    f"it was opened ({exc}); the worker stops, the changelog holds the writes and recovery restores "
                    "them once the disk is writable") from exc
            self.stores[key] = store
        return store

    def _close(self, table: Table, number: int) -> None:
        if isinstance(self.stores.get((table.name, number)), MemoryStore):
            return  # nothing to release; keeping it avoids a full replay on the next assignment
        store = self.stores.pop((table.name, number), None)
        if store is not None:
            _close_store(store, f"{table.name}[{number}]")

    def _partition_count(self, topic: str) -> int:
        return self.context.partition_count(topic)

    def drop(self, select: Callable[[int, int], bool]) -> None:
        """Give up the selected partitions (fenced): they recover again when reassigned."""
        for table in self.tables:
            for number in [n for n in table.local if select(table.partitions, n)]:
                del table.local[number]
                self._close(table, number)

    # -- the tasks' moments (runtime/tasks.py; ``rebalanced`` below is one too) ------------------

    def tasks_lost(self, tps: list[TP]) -> None:
        """Drop the write caches of the table partitions of ``tps`` (lost: the next owner has
        them, from the changelog as last committed)."""
        numbers = {(self._partition_count(tp.topic), tp.partition) for tp in tps}
        self.discard(lambda partitions, number: (partitions, number) in numbers)

    def tasks_fenced(self, tps: list[TP], tables: TableSelection) -> None:
        self.drop(tables)

    def owned_numbers(self, table: Table, assigned: Iterable[TP]) -> set[int]:
        """Table partitions this worker serves, given its source assignment."""
        if table.is_global:
            return set(range(table.partitions))
        changelog = table.changelog.name
        return {tp.partition for tp in assigned
                if tp.topic != changelog and self._partition_count(tp.topic) == table.partitions}

    # -- rebalance ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Global tables recover at startup; they do not depend on the assignment."""
        await self.rebalanced(set())

    async def rebalanced(self, assigned: set[TP]) -> list[TP]:
        """Called after every assignment change (with the whole new assignment); returns the
        source partitions it paused until their tables are recovered (it resumes them then).

        Everything up to the pause runs without awaiting, so no record of a partition that
        needs recovery can be fetched and processed before its table is ready.
        """
        self._generation += 1
        generation = self._generation
        self._assigned = set(assigned)
        to_recover: dict[TP, Store] = {}
        for table in self.tables:
            owned = self.owned_numbers(table, assigned)
            for number in list(table.local):
                if number not in owned:
                    del table.local[number]
                    if not self.app.conf.table_standby_replicas:
                        self._close(table, number)  # with standbys, _retail decides
            for number in owned:
                part = table.local.get(number)
                if part is None or not part.ready:
                    store = self._store(table, number)
                    table.local[number] = TablePartition(number, store)
                    to_recover[TP(table.changelog.name, number)] = store
        paused = [tp for tp in assigned if self._waits_for_recovery(tp, to_recover)]
        if paused and self.context.pauses is not None:
            self.context.pauses.hold("recovery", paused)
        if to_recover:
            self.progress = RecoveryProgress(active=True, started=time.monotonic())
        await self.tailer.stop()
        if self._recovering is not None:
            self._recovering.cancel()
            await asyncio.gather(self._recovering, return_exceptions=True)
        if to_recover:
            self._recovering = halting("table recovery", lambda: self._recover(generation, to_recover, paused),
                                       self.context.fail)
        else:
            await self._serve_standby()
        return paused

    def _waits_for_recovery(self, tp: TP, to_recover: dict[TP, Store]) -> bool:
        count = self._partition_count(tp.topic)
        return any(c.partition == tp.partition and self._partition_count(c.topic) == count for c in to_recover)

    async def _recover(self, generation: int, stores: dict[TP, Store], paused: list[TP]) -> None:
        # each paused source partition waits for the changelog partitions of its own number only
        waiting = {tp: {c for c in stores if self._waits_for_recovery(tp, {c: stores[c]})} for tp in paused}

        blocks: dict[TP, MarkedBlocks] = {}

        def partition_done(changelog: TP) -> None:
            if generation != self._generation:
                return
            table = self._by_changelog[changelog.topic]
            part = table.local.get(changelog.partition)
            if part is not None:
                block = blocks.get(changelog)
                if block is not None and block.dropped:  # before any record can write the table
                    self.blocks_dropped += 1
                    log.warning("table %r partition %d: changelog records of a checkpoint whose offsets were never "
                                "committed were not restored (their input records are processed again); %d key(s) "
                                "are rewritten at the next checkpoint", table.name, changelog.partition,
                                len(block.dropped))
                    table.rewrite(changelog.partition, block.dropped)
                part.ready = True
            ready = []
            for tp, needs in list(waiting.items()):
                needs.discard(changelog)
                if not needs:
                    ready.append(tp)
                    del waiting[tp]
            if ready and self.context.consumer is not None:
                log.info("table partitions of %s recovered: processing them while others restore",
                         ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(ready)))
                self._resume(ready)

        try:
            if self.app.conf.exactly_once and paused:
                await self.context.wait_stable_offsets(paused)
            blocks.update(await self._blocks(stores))
            replayed = await replay(self.driver, stores, self.progress, on_done=partition_done,
                                    bad_values=self.bad_values, on_bad=self.bad_changelog_record, blocks=blocks,
                                    check=self.check_changelog)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self.context.stopping:  # its consumer closed under it: a clean stop, not a fault
                log.info("table recovery abandoned: the worker is stopping (%r)", exc)
                return
            log.exception("table recovery failed")
            await self.context.fail(exc)
            return
        if generation != self._generation:
            return
        self.replayed_total += replayed
        for table in self.tables:
            for part in table.local.values():
                part.ready = True
        progress = self.progress
        progress.active = False
        log.info("recovered %d changelog records for %d partitions in %.2fs",
                 replayed, len(stores), time.monotonic() - progress.started)
        left = list(waiting)
        if left and self.context.consumer is not None:
            self._resume(left)
        await self._serve_standby()

    # -- checkpoint marks (marks.py) ------------------------------------------------------------

    def _marked(self, table: Table) -> bool:
        """At-least-once tables carry checkpoint marks in their changelogs; global ones do not
        (any worker writes them, no input partition goes with them), nor do tables whose changelog
        is a topic the app declared (its readers would see them: declared_changelog.py)."""
        return not self.app.conf.exactly_once and not table.is_global and not table.changelog_declared

    def _feeds(self, table: Table, number: int, tp: TP) -> bool:
        """Whether input partition ``tp`` goes with table partition ``number`` (co-partitioned)."""
        return (tp.partition == number and tp.topic != table.changelog.name
                and self._partition_count(tp.topic) == table.partitions)

    def _sources(self, table: Table, number: int, offsets: dict[TP, int]) -> dict[str, int]:
        """``offsets`` of the input partitions that go with table partition ``number``."""
        return {tp.topic: offset for tp, offset in offsets.items() if self._feeds(table, number, tp)}

    async def _blocks(self, stores: dict[TP, Store]) -> dict[TP, MarkedBlocks]:
        """How a restore judges each at-least-once changelog's blocks: by the group's committed
        offsets of the same-numbered inputs. A store already past them (a standby that applied a
        block whose commit never came, or one whose worker stopped before its commit) is emptied
        and restored from the start."""
        marked = {tp: t for tp in stores if self._marked(t := self._by_changelog[tp.topic])}
        consumer = self.context.consumer
        if not marked or consumer is None:
            return {}
        inputs = [tp for tp in self._assigned
                  if any(self._feeds(t, c.partition, tp) for c, t in marked.items())]
        committed = await retry_while_unreachable(lambda: consumer.committed(inputs),
                                                  "reading committed offsets for table recovery") if inputs else {}
        blocks = {}
        for tp, table in marked.items():
            ours = {s.topic: o for s, o in committed.items() if s.partition == tp.partition}
            accept = committed_covers(ours)
            store = stores[tp]
            if store.sources is not None and not accept(mark_offsets(store.sources)):
                log.warning("table %r partition %d: the local store is ahead of the committed offsets (%s); "
                            "restoring it from the changelog's start", table.name, tp.partition,
                            self._why_ahead(tp, ours))
                store.reset()
                self.stores_reset += 1
            blocks[tp] = MarkedBlocks(accept, marked=store.sources is not None, after=store.offset)
        return blocks

    def _why_ahead(self, changelog: TP, committed: dict[str, int | None]) -> str:
        """Why a store holds a checkpoint the group's committed offsets do not reach (``committed``:
        those of its inputs), as far as this worker can tell."""
        if changelog in self.tailer.applied_to:
            return "a standby applied a checkpoint that never committed"
        if all(offset is None for offset in committed.values()):
            return ("the group has no committed offsets for its inputs: a new or reset group, or a broker that lost "
                    "them, as a restarted dev broker does")
        return ("it holds a checkpoint that never committed: a worker stopped between writing its changelog and "
                "committing its offsets")

    def _resume(self, tps: list[TP]) -> None:
        pauses = self.context.pauses
        assert pauses is not None  # set when the runtime started, before any recovery
        pauses.release("recovery", tps)
        for callback in self.on_resumed:
            callback(tps)

    async def _serve_standby(self) -> None:
        for table in self.tables:
            for part in table.local.values():
                part.ready = True
        await self.announce()
        self._placement_stale = False
        await self._retail(force=True)
        while self._placement_stale:  # claims that arrived meanwhile
            self._placement_stale = False
            await self._retail()

    def _standby_stores(self) -> dict[TP, Store]:
        """The partitions this worker keeps warm: with ``table_standby_replicas=N``, those for which
        it is one of the N standbys membership places (runtime/membership.py)."""
        count = self.app.conf.table_standby_replicas
        out: dict[TP, Store] = {}
        if not count:
            return out
        membership = self.membership
        for table in self.tables:
            if table.is_global:
                continue
            for number in range(table.partitions):
                if number in table.local:
                    continue
                if membership is not None:
                    placed = membership.standbys(table.name, number, count, table.partitions)
                    if membership.member_id not in placed:
                        continue
                out[TP(table.changelog.name, number)] = self._store(table, number)
        return out

    async def _retail(self, *, force: bool = False) -> None:
        """Tail the standby and global-table partitions; close stores this worker no longer keeps."""
        async with self._retailing:
            await self._place(force)

    async def _place(self, force: bool) -> None:
        """Compute the placement from the claims known now and apply it."""
        tail = self._standby_stores()
        for table in self.tables:
            if table.is_global:
                for number, part in table.local.items():
                    tail[TP(table.changelog.name, number)] = part.store
        if force or set(tail) != set(self.tailer.stores):  # first: the tailer lets go of what is closed next
            await self.tailer.restart(tail, {tp for tp in tail if self._marked(self._by_changelog[tp.topic])})
        keep = {(t.name, n) for t in self.tables for n in t.local}  # as of now: the restart awaited
        keep |= {(self._by_changelog[tp.topic].name, tp.partition) for tp in tail}
        for name, number in [k for k in self.stores if k not in keep]:
            self._close(self._by_name[name], number)

    async def membership_changed(self) -> None:
        """Members came or went: standby placement may have moved (during a recovery, its end
        re-places them, again if claims arrive while it does)."""
        if self._recovering is not None and not self._recovering.done():
            self._placement_stale = True
            return
        await self._retail()

    async def stop(self) -> None:
        if self._callbacks_running is not None:  # callbacks of windows already committed
            await asyncio.gather(self._callbacks_running, return_exceptions=True)
        await self.tailer.stop()
        if self._recovering is not None:
            self._recovering.cancel()
            await asyncio.gather(self._recovering, return_exceptions=True)
        for table in self.tables:
            table.local.clear()
        for (name, number), store in self.stores.items():
            _close_store(store, f"{name}[{number}]")
        self.stores.clear()

    # -- checkpoint participant -----------------------------------------------------------------

    def cached_keys(self) -> int:
        """Keys written since the last checkpoint, all tables together (the write caches' size)."""
        return sum(len(part.cache) + len(part.borrowed) for t in self.tables for part in t.local.values())

    @staticmethod
    def changed_keys(changes: Changes) -> int:
        """Keys in a snapshot ``prepare`` took (held in memory until it is applied)."""
        return sum(len(batch) for _table, _number, batch, _mark in changes)

    def prepare(self, processed: dict[TP, int] | None = None) -> Changes:
        """Snapshot every table's changes; runs in the same tick as the offsets are taken.
        ``processed`` (at-least-once): the input offsets below which every record is done,
        for the checkpoint marks (marks.py)."""
        return [(t, n, batch, mark_value(self._sources(t, n, processed))
                 if processed is not None and self._marked(t) else None)
                for t in self.tables for n, batch in t.take_changes().items()]

    async def send(self, changes: Changes, producer_for: Callable[[int, int], Producer]) -> dict[tuple[str, int], Any]:
        """One changelog record per changed key, then the mark; returns the last delivery per
        partition. ``producer_for(partitions, number)``: under exactly-once, the partition's
        transaction."""
        last: dict[tuple[str, int], Any] = {}
        for table, number, batch, mark in changes:
            topic = table.changelog.name
            producer = producer_for(table.partitions, number)
            part = table.local.get(number)
            if mark is not None and part is not None and not part.opened:  # this worker's first block
                await producer.send(topic, MARK_KEY, OPENING_MARK, partition=number, headers=MARK_HEADERS, track=False)
            fut = None
            final = len(batch) - 1 if mark is None else -1
            try_send = producer.try_send  # untracked, without a coroutine while the client has room
            for i, (key, value) in enumerate(batch.items()):  # only the last offset is needed
                if i == final:
                    fut = await producer.send(topic, key, value, partition=number)
                elif not try_send(topic, key, value, number):
                    await producer.send(topic, key, value, partition=number, track=False)
            if mark is not None:
                fut = await producer.send(topic, MARK_KEY, mark, partition=number, headers=MARK_HEADERS)
            last[(table.name, number)] = fut
        for table in self.tables:  # windows closed at this checkpoint, in the same transaction
            for number in table.emitting():
                await self._emit_closed(table, number, producer_for(table.partitions, number))
        return last

    async def _emit_closed(self, table: Any, number: int, producer: Producer) -> None:
        closed, late = table.take_emits(number)
        for key, window, value, key_bytes in closed:
            if table.on_window_close is not None:
                self._window_callbacks.append((table, number, key, window, value))
            if table.final_topic is not None:
                await producer.send(table.final_topic.name, key_bytes, table.final_record(window, value),
                                    partition=number)
        for message, reason in late:  # late="dead-letter"
            headers = dead_letter_headers(message, reason, "window", self.app.id)
            await producer.send(self.app.dlq_topic_name, message.key, message.value, headers=headers, track=False)

    def apply(self, changes: Changes, last: dict[tuple[str, int], Any],
              keep: Callable[[int, int], bool] | None = None) -> None:
        """After the commit: write each batch, with its changelog offset, to the store (only the
        partitions ``keep(partitions, number)`` accepts: a rolled-back one keeps its store as is)."""
        for table, number, batch, mark in changes:
            if keep is not None and not keep(table.partitions, number):
                continue
            fut = last.get((table.name, number))
            offset = delivery_position(fut.result())[1] if fut is not None else None
            part = table.local.get(number)
            if part is not None and mark is not None:
                part.opened = True
            store = part.store if part is not None else self.stores.get((table.name, number))
            if store is not None:
                try:
                    store.apply(batch, offset, mark)
                except Exception as exc:
                    raise StoreWriteFailed(
                        f"table {table.name!r} partition {number}: writing the store under "
                        f"{self.app.conf.data_dir!r} failed ({exc}); the worker stops, the changelog "
                        "holds the writes and recovery restores them once the disk is writable") from exc
            table.changes_applied(number)
        self._run_window_callbacks(keep)

    def _run_window_callbacks(self, keep: Callable[[int, int], bool] | None) -> None:
        """After a commit: the on_window_close calls of the windows it closed, in order, in the
        background (a slow callback delays no checkpoint; a failing one is logged)."""
        due = [c for c in self._window_callbacks if keep is None or keep(c[0].partitions, c[1])]
        if not due:
            return
        self._window_callbacks = [c for c in self._window_callbacks if c not in due]
        previous = self._callbacks_running

        async def run() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            for table, _number, key, window, value in due:
                await table.window_closed(key, window, value)

        self._callbacks_running = asyncio.create_task(run(), name="streamkit-on-window-close")

    def abort(self, changes: Changes) -> None:
        for table in {t for t, _, _, _ in changes}:
            table.changes_dropped()

    def discard(self, select: Callable[[int, int], bool]) -> None:
        """Exactly-once rollback: forget uncommitted writes of the selected partitions, so reads
        fall through to the store, which holds the last committed state."""
        for table in self.tables:
            for number in list(table.local):
                if select(table.partitions, number):
                    table.forget_writes(number)
        # their windows close again when the records are processed again
        self._window_callbacks = [c for c in self._window_callbacks if not select(c[0].partitions, c[1])]


def _close_store(store: Store, what: str) -> None:
    """Close a store; a failure (a full disk refusing the final flush) is logged, not raised: the
    changelog holds every committed write and the next start recovers from the store's offset."""
    try:
        store.close()
    except Exception as exc:
        log.warning("closing the store of table partition %s failed: %s", what, exc)
