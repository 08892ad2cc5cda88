"""What a worker does as partitions come, go or are taken from it: the group's rebalance
callbacks (one at a time), the revocation's bounded finish and commit, exactly-once fencing and
the rewind to the committed offsets after a rolled-back checkpoint or a fence.

:class:`PartitionOwnership` is a collaborator the :class:`~streamkit.runtime.worker.Runtime`
owns (``runtime.ownership``): the consumer's rebalance callbacks and the checkpoint's rewind and
fence callbacks go to it. It owns the rebalance state (the pending seeks, the callbacks' lock,
the rebalance counters and the leader flag) and reads the rest through :class:`RuntimeState`.
What the tasks keep outside their source partitions (the exactly-once producer units, the
table shards, a join's held records) it reaches through the task manager, one call per moment.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StoreWriteFailed
from ..transport import TP
from ..transport.base import retry_while_unreachable

if TYPE_CHECKING:
    from ..settings import Settings
    from ..transport import Consumer
    from ..types.app import AppProtocol
    from .checkpoint import Checkpoint
    from .membership import Membership
    from .pauses import PauseLedger
    from .router import Router
    from .tasks import TaskManager

log = logging.getLogger("streamkit.worker")  # the worker's own lines, wherever the code sits


def describe_tps(tps: list[TP]) -> str:
    """``topic[0,1,2] other[0]``: one short line for logs."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{','.join(map(str, sorted(ps)))}]" for t, ps in sorted(by_topic.items()))


class RuntimeState(Protocol):
    """What the rebalance handler reads from its runtime: the clients and managers built as the
    worker starts (``None`` before; ``tasks`` is replaced once the topology is frozen), whether it
    is stopping, and the runtime's own actions (a sensor-told checkpoint, halting)."""

    @property
    def consumer(self) -> Consumer | None: ...
    @property
    def pauses(self) -> PauseLedger | None: ...
    @property
    def tasks(self) -> TaskManager: ...
    @property
    def checkpoint(self) -> Checkpoint | None: ...
    @property
    def membership(self) -> Membership | None: ...
    @property
    def stopping(self) -> bool: ...
    def owns_leadership(self) -> bool: ...
    async def commit(self, tps: Any = None, *, wait: bool = True) -> Any: ...
    async def fail(self, exc: BaseException) -> None: ...


class PartitionOwnership:
    """The worker's rebalance handler: which partitions it owns, and what changes with them."""

    def __init__(self, runtime: RuntimeState, app: AppProtocol, router: Router,
                 assigned: set[TP], failed: asyncio.Event) -> None:
        self._runtime = runtime
        self.app = app
        self.conf: Settings = app.conf
        self.router = router
        self.assigned = assigned  # the runtime's set of owned partitions, kept up to date here
        self.failed = failed  # set once the worker halts: a halting worker reads no more
        self._rebalance_lock = asyncio.Lock()  # assignment and revocation callbacks, one at a time
        self._rebalance_states: list[Any] | None = None  # sensors' on_rebalance_start results
        self.rebalancing = False  # Faust's app.rebalancing: from a revocation (or an assignment) to its end
        self.rebalances = 0
        self.is_leader = False

    # -- rebalance ------------------------------------------------------------------------------

    async def on_assigned(self, tps: list[TP]) -> None:
        """One rebalance callback at a time: a revocation can outlast the client's wait for it
        (the confluent driver returns to librdkafka after 120 s; an exactly-once checkpoint of lost partitions waits
        for a broker that is away), and an assignment handled meanwhile had its partitions
        removed by the revocation's end. The client reads none of ``tps`` until it is handled
        (the driver pauses them as it assigns them; released here)."""
        async with self._rebalance_lock:
            if self._runtime.pauses is not None:
                self._runtime.pauses.forget(tps)  # a fresh assignment reads unpaused, whatever held the old one
                self._runtime.pauses.hold("assigning", tps)
            try:
                await self._handle_assigned(tps)
            except Exception as exc:  # its partitions would stay paused (fencing, recovery): halt, loudly
                log.error("handling the assignment of %s failed: %r", describe_tps(tps), exc)
                await self._runtime.fail(exc)
                raise
            finally:
                if self._runtime.pauses is not None and not self.failed.is_set():  # a halting worker reads no more
                    self._runtime.pauses.release("assigning", tps)

    async def on_revoked(self, tps: list[TP]) -> None:
        async with self._rebalance_lock:
            await self._handle_revoked(tps)

    async def on_lost(self, tps: list[TP]) -> None:
        """Partitions the group took away while this worker could not answer (its session
        expired: a broker outage, a frozen process). The group refuses commits for them, and
        another member may be writing their tables already. At-least-once they are dropped
        without a checkpoint: their records since the last commit are processed again by the
        next owner, and no changelog record of this worker's cache lands after the next owner's
        (a revocation's checkpoint sent them, then waited for the broker to refuse the offsets).
        Exactly-once keeps the revocation's path: its commit fails and rolls the unit back."""
        async with self._rebalance_lock:
            if tps:
                log.warning("lost %d partitions (the group moved on while this worker could not answer): %s; "
                            "their records since the last commit are processed again by their next owner",
                            len(tps), describe_tps(tps))
            await self._handle_revoked(tps, lost=not self.conf.exactly_once)

    async def _handle_assigned(self, tps: list[TP]) -> None:
        self.rebalancing = True
        self.rebalances += 1
        # A rewind scheduled under an earlier ownership (a checkpoint rolled back as they were
        # revoked) would take them back behind what their owner since committed: they start at
        # the offsets committed now instead (still a seek: what a fetch returns before it is
        # applied is dropped, and read again from there)
        stale = self._runtime.tasks.partitions.take_seeks(tps)
        for state in self._runtime.tasks.partitions.each(tps):
            state.assigned()  # owned afresh, whatever cut a revocation short
        self.assigned.update(tps)
        self.is_leader = self._runtime.owns_leadership()
        log.info("assigned %d partitions%s: %s; owns now: %s", len(tps), " (leader)" if self.is_leader else "",
                 describe_tps(tps) or "none", describe_tps(sorted(self.assigned)) or "nothing")
        fencing = self.conf.exactly_once and self.conf.transactions_per_partition and bool(tps)
        if fencing:
            assert self._runtime.pauses is not None
            self._runtime.pauses.hold("fencing", tps)  # nothing is read before the previous owners are fenced
            await self._fence_previous_owners(tps)
        if stale:
            await self._seek_committed(stale)
        try:
            waiting = await self._runtime.tasks.rebalanced(self.assigned)  # the tables' recovery
        except StoreWriteFailed as exc:  # a store that cannot be opened (disk full): nothing more
            self.router.revoke(tps)  # is read or handed to agents; the worker halts
            if self._runtime.pauses is not None:
                self._runtime.pauses.hold("store failed", tps)
            await self._runtime.fail(exc)
            return
        self._runtime.tasks.assigned(tps, waiting)
        if fencing:
            assert self._runtime.pauses is not None  # held them above
            self._runtime.pauses.release("fencing", tps)  # those waiting for their tables stay paused for that
        if self._runtime.pauses is not None:
            # The rejoin after a fence is done; partitions it gave straight back (an incremental
            # protocol keeps them, unannounced) are read again, from the committed offsets
            self._runtime.pauses.release_all("fenced")
        await self._announce_assignment()
        await self.app.on_partitions_assigned.send(assigned=set(tps))
        self.rebalancing = False
        await self.app.on_rebalance_complete.send()
        self._rebalance_started()
        if self._rebalance_states is not None:
            states, self._rebalance_states = self._rebalance_states, None
            self.app.sensors.call_each("on_rebalance_end", states, self.app)

    async def _handle_revoked(self, tps: list[TP], *, lost: bool = False) -> None:
        """Finish in-flight records of ``tps`` (bounded), commit them unless ``lost``, forget
        their state (their tasks' shards with the task manager's ``lose`` and ``revoke``)."""
        if not tps:
            return
        self._rebalance_started()
        self.rebalancing = not self._runtime.stopping
        await self.app.on_partitions_revoked.send(revoked=set(tps))
        self._runtime.tasks.suspend(tps, "lost: finishing in-flight records, committing nothing" if lost
                                    else "revoked: finishing in-flight records and committing")
        if lost:
            self._runtime.tasks.lose(tps)  # no checkpoint meanwhile sends their table writes
        await self.release(tps, self.conf.stop_timeout, commit=not lost)
        if lost:
            self._runtime.tasks.lose(tps)  # those of the records that were finishing
        self.assigned.difference_update(tps)
        if self._runtime.pauses is not None:
            self._runtime.pauses.forget(tps)
        await self._announce_assignment()
        self.is_leader = self._runtime.owns_leadership()
        # the tasks close with their producer units and join state; the tables follow what is left
        await self._runtime.tasks.revoke(tps, self.assigned, stopping=self._runtime.stopping)

    # -- exactly-once -----------------------------------------------------------------------------

    async def _fence_previous_owners(self, tps: list[TP]) -> None:
        """EOS v1: our task producers fence the previous owners' and settle their open
        transactions; only then are the committed offsets final, so start reading from them."""
        consumer = self._runtime.consumer
        assert consumer is not None
        await self._runtime.tasks.open(tps)
        committed = await retry_while_unreachable(lambda: consumer.committed(tps), "committed offsets")
        for tp, offset in committed.items():
            if offset is not None:
                await consumer.seek(tp, offset)

    async def _seek_committed(self, targets: dict[TP, int]) -> None:
        """Read the partitions of ``targets`` from their committed offsets, or, where none is
        committed yet, from their target (applied before the next fetch)."""
        consumer = self._runtime.consumer
        assert consumer is not None
        committed = await retry_while_unreachable(lambda: consumer.committed(list(targets)), "committed offsets")
        self._seek_later({tp: target if committed.get(tp) is None else committed[tp]
                          for tp, target in targets.items()})

    def _seek_later(self, targets: dict[TP, int]) -> None:
        """Seek before the next fetch (what a fetch in flight returns meanwhile is dropped)."""
        partitions = self._runtime.tasks.partitions
        for tp, offset in targets.items():
            partitions.seek_later(tp, offset)

    @property
    def pending_seeks(self) -> dict[TP, int]:
        """The seeks waiting for the consume loop (a copy: for reading)."""
        partitions = self._runtime.tasks.partitions
        return {tp: seek for tp in partitions.seeking if (seek := partitions[tp].pending_seek) is not None}

    async def wait_stable_offsets(self, tps: list[TP]) -> None:
        """Block until no transaction of a previous owner is pending on ``tps`` (a read_committed
        committed-offset fetch waits for that), so table recovery sees its outcome."""
        assert self._runtime.consumer is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.conf.transaction_timeout_ms / 1000 + 30
        while True:
            try:
                await self._runtime.consumer.committed(tps)
                return
            except Exception as exc:
                if loop.time() > deadline:
                    raise
                log.info("waiting for a previous owner's transaction to finish: %r", exc)
                await asyncio.sleep(1.0)

    async def apply_pending_seeks(self) -> None:
        """Seek the owned partitions of the pending seeks (the consume loop, between fetches)."""
        assert self._runtime.consumer is not None
        for tp, offset in self._runtime.tasks.partitions.take_seeks().items():
            if tp in self.assigned:
                await self._runtime.consumer.seek(tp, offset)

    async def rewind(self, tps: list[TP]) -> None:
        """After a rolled-back checkpoint: read ``tps`` again from the last committed offsets.
        The consume loop seeks before its next fetch, dropping what a fetch in flight returns."""
        self._seek_later(self.router.rewind(tps))
        self._runtime.tasks.rewound(tps)  # a join forgets what it learnt of them since

    async def fenced(self, task: Any) -> None:
        """A newer producer or group generation took over: stop writing, drop the partitions
        (tables recover again when they come back) and rejoin the group."""
        assert self._runtime.consumer is not None and self._runtime.checkpoint is not None
        tasks = self._runtime.tasks
        tps = tasks.fenced_partitions(task, self.assigned)  # v2: every partition
        log.error("fenced: dropping %s and rejoining the group", describe_tps(tps) or "no partitions")
        tasks.suspend(tps, "fenced: its partitions are dropped until the group reassigns them")
        assert self._runtime.pauses is not None
        self._runtime.pauses.hold("fenced", tps)  # until the rejoin assigns them afresh
        # Back to the last committed offsets, whatever the rejoin does: an incremental rebalance
        # may hand these partitions straight back without resetting their positions, and
        # reading on from there would skip the records of the aborted transaction.
        self._seek_later(self.router.rewind(tps))
        self._runtime.checkpoint.forget(tps)
        await tasks.fence(task, tps)  # its table shards and join state dropped, its producer unit reopened
        self._runtime.consumer.rejoin()

    async def release(self, tps: list[TP], timeout: float, *, commit: bool = True) -> None:
        """Stop handing out records of ``tps``, let those in progress finish (up to ``timeout``),
        and, if ``commit``, checkpoint them."""
        revoked = set(tps)
        self.router.revoke(tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.router.busy_with(revoked) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if self.router.busy_with(revoked):
            log.warning("records still in flight after %.1fs; they will be processed again", timeout)
        if self._runtime.checkpoint is not None and commit:
            try:
                if self._runtime.stopping:  # a broker away must not keep a stopping worker up
                    async with asyncio.timeout(max(timeout, 1.0)):  # not wait_for: see worker._bounded
                        await self._runtime.commit(tps)
                else:
                    await self._runtime.commit(tps)
            except Exception as exc:
                log.warning("commit on %s failed (records will be processed again): %r",
                            "stop" if self._runtime.stopping else "revoke", exc)
        if self._runtime.checkpoint is not None:
            self._runtime.checkpoint.forget(tps)
        self.router.forget(tps)

    async def _announce_assignment(self) -> None:
        """Tell the cluster which topic partitions this worker is assigned (``@app.topic_route``)."""
        if self._runtime.membership is None:
            return
        topics: dict[str, list[int]] = {}
        for tp in sorted(self.assigned):
            topics.setdefault(tp.topic, []).append(tp.partition)
        try:
            await self._runtime.membership.publish(topics=topics)
        except Exception as exc:  # the heartbeat publishes it again
            log.warning("announcing the assignment failed: %r", exc)

    def _rebalance_started(self) -> None:
        """Sensors' ``on_rebalance_start`` (once per rebalance; a stopping worker's revocation is none)."""
        if self._rebalance_states is None and self.app.sensors.active and not self._runtime.stopping:
            self._rebalance_states = self.app.sensors.call("on_rebalance_start", self.app)
