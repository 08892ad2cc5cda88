"""The worker runtime: a mode-streaming service that owns the clients and the consumer loop.

Start: producer → topics checked/created → agents started → group subscription → loop.
Stop (signal or ``stop`` policy): stop fetching, let in-flight records finish (bounded), stop
agents, run the checkpoint, leave the group, flush and close the producer.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from mode import Service

from ..errors import AgentFailed, ConfigurationError, StoreWriteFailed, WorkerStopped
from ..settings import DriverName, Rebalancing
from ..topology import Topology, build_topology
from ..transport import TP, Consumer, Producer, create_driver
from ..transport.auth_errors import refusal_in
from ..transport.base import is_retriable
from ..transport.broker_features import supports_consumer_group_protocol
from . import gc_tuning, loops
from .broker_watch import BrokerWatch
from .checkpoint import Checkpoint, ExactlyOnceCheckpoint
from .dead_letters import ErrorPolicy, HeldDeadLetters
from .inbox import wait_for_room
from .membership import Membership
from .ownership import PartitionOwnership
from .pattern_watch import PatternWatch
from .pauses import PauseLedger
from .purge import RepartitionPurge, purged_topics
from .rebalancing import ProtocolChoice, apply_group_timeouts, choose_protocol, refused_timeouts_message
from .router import Router
from .tasks import TaskManager
from .topic_admin import connect_admin

if TYPE_CHECKING:
    from ..types.app import AppProtocol, TopicProtocol
    from .inbox import Subscriber
    from .tasks import TaskShard

log = logging.getLogger("streamkit.worker")

AGENT_START_TIMEOUT = 5.0  # seconds agents get to reach their first `async for` before the freeze
CACHE_CHECK_SECONDS = 0.2  # how often the commit loop looks at the tables' write caches
CONSUMER_FAILURE_BUDGET = 60.0  # seconds of consecutive non-retriable fetch errors before halting


class Runtime(Service):
    """One worker process's machinery for one App; its rebalance handler is ``self.ownership``
    (runtime/ownership.py)."""

    def __init__(self, app: "AppProtocol", *, table_manager: Callable[..., Any] | None = None, **kwargs: Any) -> None:
        self.app = app
        self._table_manager = table_manager  # tables/manager.TableManager: a higher layer, passed in
        self.conf = app.conf
        self.driver = create_driver(app.conf)
        self.producer: Producer = None  # type: ignore[assignment]  # created in on_start
        self.consumer: Consumer | None = None
        self.pauses: PauseLedger | None = None  # with the consumer: who paused which partition
        self.group_protocol: ProtocolChoice | None = None  # chosen at start (runtime/rebalancing.py)
        self.tasks = TaskManager(())  # replaced once the topology is frozen
        self.errors = ErrorPolicy(app.conf.error_policy, app.id, app.dlq_topic_name, lambda: self.producer, self.fail)
        self.router = Router(self.errors, self.tasks.partitions)
        self.router.sensors = app.sensors
        self.checkpoint: Checkpoint | None = None
        self.txns: Any = None  # the TransactionalProducer under exactly-once
        self.identity: Any = None  # the persisted worker slot behind the transactional id
        self.partition_counts: dict[str, int] = {}
        self.tables: Any = None  # the TableManager, when the app has tables
        self.topology: Topology | None = None  # frozen at start, before the first subscribe
        self.membership: Membership | None = None  # claims on <app-id>-__cluster (tables or web)
        self.fatal: BaseException | None = None
        self.early_checkpoints = 0  # taken because the write caches reached table_cache_max_keys
        self.failed = asyncio.Event()
        self.assigned: set[TP] = set()
        self.fetch_rounds = 0  # consume loop iterations: a join's wait counts the fetches it waited
        self._loop_task: asyncio.Task[None] | None = None
        self._commit_task: asyncio.Task[None] | None = None
        self.broker_watch: BrokerWatch | None = None
        self.purge: RepartitionPurge | None = None
        self.pattern_watch: PatternWatch | None = None
        self._stopping = False
        self._gc_tuned = False
        self.planning = False  # started only to freeze the topology (planning.py): an agent that cannot start fails it
        self.ownership = PartitionOwnership(self, app, self.router, self.assigned, self.failed)
        super().__init__(**kwargs)

    @property
    def stopping(self) -> bool:
        """The worker is stopping: its clients close under whatever still runs."""
        return self._stopping

    @property
    def rebalancing(self) -> bool:
        """Faust's ``app.rebalancing``: from a revocation (or an assignment) to its end."""
        return self.ownership.rebalancing

    @property
    def rebalances(self) -> int:
        """Assignments handled so far (``app.is_leader`` is known after the first)."""
        return self.ownership.rebalances

    @property
    def is_leader(self) -> bool:
        """This worker owns the leader partition (``app.is_leader``)."""
        return self.ownership.is_leader

    # -- startup --------------------------------------------------------------------------------

    async def ensure_topics(self) -> None:
        self.partition_counts.update(await self.app.ensure_topics())

    def subscribe(self, topic: object, subscriber: Subscriber) -> None:
        """An agent's stream reads ``topic`` (runtime/context.py; the router routes it)."""
        self.router.subscribe(topic, subscriber)

    def register_task_shard(self, shard: TaskShard) -> None:
        """A part keeping state of the tasks' partitions (runtime/context.py, runtime/tasks.py)."""
        self.tasks.register(shard)

    def delivered_to(self, tp: TP) -> int | None:
        """The offset after the last record of ``tp`` handed to the streams (runtime/context.py)."""
        return self.router.delivered_to(tp)

    async def wait_stable_offsets(self, tps: list[TP]) -> None:
        """Until no previous owner's transaction is pending on ``tps`` (runtime/context.py)."""
        await self.ownership.wait_stable_offsets(tps)

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``: as the broker reported it, else as declared or defaulted."""
        count = self.partition_counts.get(topic)
        if count:
            return count
        declared: TopicProtocol | None = self.app.topics.get(topic)
        if declared is not None and declared.partitions:
            return declared.partitions
        if topic in (self.app.leader_topic.name, self.app.reply_topic.name):
            return 1
        return self.conf.topic_partitions

    async def _start_producer(self) -> None:
        from .identity import WorkerIdentity

        # Every worker holds a slot under <data_dir>/<app-id> while it runs: it names the
        # transactional id, and tells `streamkit reset`/`clean-versions` a worker runs here.
        if self.identity is None:
            self.identity = WorkerIdentity(self.conf.data_dir, self.app.id)
        if not self.conf.exactly_once:
            self.producer = self.driver.producer()
            await self.producer.start()
            return
        from .transactions import TransactionalProducer

        per_partition = self.conf.transactions_per_partition
        transactional_id = self.conf.transactional_id
        if not per_partition and not transactional_id:
            transactional_id = f"{self.app.id}-worker-{self.identity.id}"
        self.txns = TransactionalProducer(self.driver, self.app.id, per_partition=per_partition,
                                          transactional_id=transactional_id, partition_count=self.partition_count)
        self.producer = self.txns
        self.tasks.register(self.txns, units=self.txns)  # the tasks' producer units
        await self.txns.start()

    async def on_start(self) -> None:
        await self.app.resolve_patterns(planning=self.planning)  # app.topic(pattern=...): what matches now
        await self.ensure_topics()  # bounded retry: BrokerUnavailable if the broker is not there
        await self._start_producer()
        for agent in self.app.agents.values():
            agent.start(self.app.processing)
        await self._agents_started()
        await self.ensure_topics()
        self.partition_counts.update(await self.app.resolve_tables(self.router.topics(), self.partition_counts))
        self.router.frozen = True
        self.topology = build_topology(self.app, self.router.topics(), self.partition_counts)
        log.info("topology frozen: %d agent(s), %d table(s), reading %s", len(self.topology.agents),
                 len(self.topology.tables), ", ".join(self.topology.subscribed) or "nothing")
        log.debug("%s", self.topology.describe())
        self.tasks = TaskManager(self.topology.copartitioned, self.tasks.partitions, self.tasks.shards)
        self.group_protocol = await self._choose_group_protocol(self.topology)
        self.consumer = self.driver.consumer(self.app.id, protocol=self.group_protocol.protocol)
        self.pauses = PauseLedger(self.consumer, self.tasks.partitions)
        self.router.pauses = self.pauses
        await self.consumer.start()
        if self.txns is not None:
            self.checkpoint = ExactlyOnceCheckpoint(self.router, self.consumer, self.txns,
                                                    rewind=self.ownership.rewind,
                                                    fenced=self.ownership.fenced)
            self.router.held_letters = HeldDeadLetters(self.tasks.partitions)
        else:
            self.checkpoint = Checkpoint(self.router, self.consumer, self.producer, rewind=self.ownership.rewind)
        self.checkpoint.scheduled = self.app.scheduled_sends
        if self.app.tables or self.conf.web_enabled:
            conf = self.conf
            url = conf.web_url if conf.web_enabled else None
            self.membership = Membership(self.driver, self.app.cluster_topic.name, self._send_claim, url=url,
                                         range_failover=self.group_protocol.range_failover)
            await self.membership.start()
        if self.app.tables:
            assert self._table_manager is not None, "an app with tables passes its table manager"
            assert self.membership is not None  # started above for an app with tables
            self.tables = self._table_manager(self.app, self.app.processing, self.driver, self.app.tables.values())
            self.tasks.register(self.tables)  # the tasks' table shards
            self.checkpoint.participants.append(self.tables)
            self.checkpoint.cache_limit = self.conf.table_cache_max_keys
            self.tables.membership = self.membership
            self.tables.on_serving.append(self.membership.publish)
            self.membership.on_change.append(self.tables.membership_changed)
            self.tables.on_resumed.append(self.tasks.restored)
            await self.tables.start()
        gc_tuning.acquire(self.conf.gc_young_threshold)
        self._gc_tuned = True
        self.broker_watch = BrokerWatch(self.consumer, self.conf.bootstrap_servers)
        self.broker_watch.start()
        self.purge = RepartitionPurge(self.driver, self.consumer, purged_topics(self.app.topics.values()),
                                      lambda: self.assigned, self.conf.repartition_purge_interval)
        self.purge.start()
        self.pattern_watch = PatternWatch(self.driver, self.conf.bootstrap_servers, self.conf.broker_connect_timeout,
                                          [(agent.name, agent.topic) for agent in self.app.agents.values()
                                           if hasattr(agent.topic, "matching")],
                                          lambda names: [*self.app.derived_topics(names), self.app.dlq_topic_name])
        self.pattern_watch.start()
        # neither may die silently, nor start over (loops.py): an exception escaping one halts the worker
        self._loop_task = loops.halting("consume", self._consume_loop, self.fail)
        self._commit_task = loops.halting("commit", self._commit_loop, self.fail)
        log.info("worker for %r started on %s (%s driver)", self.app.id, self.conf.bootstrap_servers, self.driver.name)

    async def _choose_group_protocol(self, topology: Topology) -> ProtocolChoice:
        """runtime/rebalancing.py decides; KIP-848 counts as available only if the broker has it
        and (unless asked for explicitly) accepts this group's session timeout."""
        kip848 = False
        requested = self.conf.rebalancing
        if self.driver.name == DriverName.CONFLUENT and requested != Rebalancing.EAGER:
            kip848 = await supports_consumer_group_protocol(self.conf)
            if kip848:
                admin = await connect_admin(self.driver, self.conf.bootstrap_servers, self.conf.broker_connect_timeout)
                try:
                    refused = await apply_group_timeouts(admin, self.app.id, self.conf)
                finally:
                    await admin.stop()
                if refused:
                    explicit = requested == Rebalancing.INCREMENTAL
                    log.log(logging.WARNING if explicit else logging.INFO, "%s",
                            refused_timeouts_message(refused, requested))
                    kip848 = explicit
        standbys = self.conf.table_standby_replicas
        choice = choose_protocol(requested, self.driver.name, topology, kip848, standbys)
        log.info("%s", choice.describe())
        if standbys and not choice.range_failover:
            log.warning("table_standby_replicas=%d with %s rebalancing: the assignor does not say where a "
                        "failover moves a partition, so standbys are placed by hashing and a failover may "
                        "land on a worker without a warm copy; rebalancing='auto' places them on the "
                        "failover target (eager range)", standbys, choice.protocol.value)
        return choice

    async def _send_claim(self, topic: str, key: bytes, value: bytes) -> None:
        await self.app.send_raw(topic, key, value, partition=0)

    async def _agents_started(self) -> None:
        """Wait (bounded) until every agent's streams asked for their first record: by then their
        bodies declared every group_by/through topic, and the topology can be frozen."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + AGENT_START_TIMEOUT
        while True:
            if self.planning:
                for agent in self.app.agents.values():
                    if agent.failure is not None:
                        raise AgentFailed(str(agent.failure))
            waiting = [a.name for a in self.app.agents.values() if not a.streams_started()]
            if not waiting:
                return
            if loop.time() >= deadline:
                log.warning("agent(s) %s did not start iterating within %.0fs: the topology is frozen "
                            "without anything they declare later (such a group_by/through will fail)",
                            ", ".join(waiting), AGENT_START_TIMEOUT)
                return
            await asyncio.sleep(0.001)

    def _subscribe(self) -> None:
        assert self.consumer is not None
        ownership = self.ownership
        self.consumer.subscribe(self._group_topics(), ownership.on_assigned, ownership.on_revoked, ownership.on_lost)

    def _group_topics(self) -> list[str]:
        """The group's topics: the agents' sources, or the leader topic for an app without any.

        The leader is the owner of the group's first partition (see ``owns_leadership``), not of
        a partition of its own: a balancing assignor (cooperative-sticky, KIP-848's uniform) counts
        every partition alike, so an extra leader partition left two workers with 1 and 3 of four
        input partitions."""
        return self.router.topics() or [self.app.leader_topic.name]

    def owns_leadership(self) -> bool:
        """Exactly one member of the group owns partition 0 of its first topic (by name)."""
        return TP(self._group_topics()[0], 0) in self.assigned

    # -- the loops ------------------------------------------------------------------------------

    async def _consume_loop(self) -> None:
        assert self.consumer is not None and self.broker_watch is not None
        consumer, router, conf, assigned, watch = self.consumer, self.router, self.conf, self.assigned, self.broker_watch
        ownership, seeking = self.ownership, self.tasks.partitions.seeking
        failing_since: float | None = None
        loop = asyncio.get_running_loop()
        self._subscribe()  # once: the topology is frozen, its topics exist
        while not self._stopping:
            try:
                if seeking:
                    await ownership.apply_pending_seeks()
                full = router.full_inboxes(assigned)
                if full:  # fetched now, the records would only wait, towards a pause (inbox.py)
                    await wait_for_room(full, conf.fetch_timeout)
                batches = await consumer.getmany(conf.fetch_timeout, conf.fetch_max_records)
                if batches:
                    watch.activity()
                for tp, messages in batches.items():
                    if tp in seeking:
                        continue  # asked for during this fetch (a rewind): read from the seek's target instead
                    # (any other partition's records are delivered: nothing would read them again)
                    # A batch fetched just before a rebalance may belong to a partition that is
                    # gone: the new owner processes it, and we must not commit it.
                    if tp in assigned:
                        await router.deliver(tp, messages)
                self.fetch_rounds += 1
                failing_since = None
            except asyncio.CancelledError:
                raise
            except WorkerStopped:  # the ``stop`` error policy already asked the worker to halt
                return
            except Exception as exc:
                refused = refusal_in(exc, conf, group=self.app.id)
                if refused is not None:  # a missing ACL: no retry grants it
                    await self.fail(ConfigurationError(refused))
                    return
                if is_retriable(exc):  # the broker is away or busy: wait it out, however long
                    watch.unreachable(exc)
                    await asyncio.sleep(1.0)
                    continue
                now = loop.time()  # anything else is retried for a bounded time, then halts
                failing_since = failing_since or now
                if now - failing_since > CONSUMER_FAILURE_BUDGET:
                    log.exception("consumer keeps failing for %.0fs; halting", now - failing_since)
                    await self.fail(exc)
                    return
                log.warning("consumer error (retrying): %r", exc)
                await asyncio.sleep(1.0)

    async def commit(self, tps: Any = None, *, wait: bool = True) -> Any:
        """A checkpoint, told to the sensors (``on_commit_initiated``/``_completed``)."""
        assert self.checkpoint is not None
        sensors = self.app.sensors
        if not sensors.active:
            return await self.checkpoint.commit(tps, wait=wait)
        states = sensors.call("on_commit_initiated", self.consumer)
        committed = await self.checkpoint.commit(tps, wait=wait)
        sensors.call_each("on_commit_completed", states, self.consumer)
        return committed

    async def _commit_loop(self) -> None:
        assert self.checkpoint is not None
        while not self._stopping:
            await self._checkpoint_due()
            try:
                await self.commit(wait=False)
            except asyncio.CancelledError:
                raise
            except StoreWriteFailed as exc:  # nothing more may be built on a store that lags
                await self.fail(exc)
                return
            except Exception as exc:  # rolled back (records come again) or a failed offset commit
                refused = refusal_in(exc, self.conf, group=self.app.id)
                if refused is not None:  # a missing ACL (Write on a sink): no retry grants it
                    await self.fail(ConfigurationError(refused))
                    return
                log.warning("checkpoint did not commit (%s); the next one retries, nothing is lost", exc)

    async def _checkpoint_due(self) -> None:
        """Wait ``commit_interval``, or less once the tables' write caches hold
        ``table_cache_max_keys`` keys (many distinct keys would otherwise grow them unbounded)."""
        interval, limit = self.conf.commit_interval, self.conf.table_cache_max_keys
        if self.tables is None or interval <= CACHE_CHECK_SECONDS:
            await asyncio.sleep(interval)
            return
        due = time.monotonic() + interval
        while not self._stopping and (left := due - time.monotonic()) > 0:
            await asyncio.sleep(min(CACHE_CHECK_SECONDS, left))
            if self.tables.cached_keys() >= limit:
                self.early_checkpoints += 1
                return

    async def fail(self, exc: BaseException) -> None:
        """Halt the worker (``stop`` policy or an unrecoverable client error)."""
        if self.fatal is None:
            self.fatal = exc
            log.error("worker halting: %s", exc if str(exc) else repr(exc))
        self.failed.set()

    # -- shutdown -------------------------------------------------------------------------------

    async def on_stop(self) -> None:
        self._stopping = True
        for task in (self._loop_task, self._commit_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.broker_watch is not None:
            await self.broker_watch.stop()
        if self.purge is not None:
            await self.purge.stop()
        if self.pattern_watch is not None:
            await self.pattern_watch.stop()
        bound = self.conf.stop_timeout if self.fatal is None else 0.5
        if self.consumer is not None and self.checkpoint is not None:
            self.tasks.suspend(self.assigned, "worker stopping")
            await self.ownership.release(sorted(self.assigned), bound)
            self.tasks.close(self.assigned, "worker stopped")
        for agent in self.app.agents.values():
            await agent.stop()
        if self.membership is not None:  # its "left" claim goes out with the final checkpoint
            await _bounded(self.membership.stop(), "leaving the membership", bound)
        if self.tables is not None and self.checkpoint is not None:
            # flush what agents wrote while stopping
            await _bounded(self.commit(), "final checkpoint (records will be processed again)", bound)
            await self.tables.stop()
        if self.consumer is not None:
            await _bounded(self.consumer.stop(), "consumer close", bound)
        if self.producer is not None:
            if await _bounded(self.producer.flush(), "producer flush", bound):
                await _bounded(self.producer.stop(), "producer close", bound)
            else:
                await _bounded(self.producer.stop(), "producer close", 1.0)
        if self.identity is not None:
            self.identity.release()
        if self._gc_tuned:
            self._gc_tuned = False
            gc_tuning.release(self.conf.gc_young_threshold)
        log.info("worker for %r stopped", self.app.id)


async def _bounded(call: Any, what: str, timeout: float) -> bool:
    """Await ``call`` for at most ``timeout`` seconds; log (never raise) a failure or timeout.
    ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` can swallow a cancellation
    that arrives as the call completes (cpython gh-86296), and a stopping worker would go on."""
    try:
        async with asyncio.timeout(max(timeout, 0.5)):
            await call
        return True
    except asyncio.TimeoutError:
        log.warning("%s: gave up after %.1fs (is the broker reachable?)", what, timeout)
    except Exception as exc:
        log.warning("%s failed: %r", what, exc)
    return False
