"""The fast driver: librdkafka through confluent-kafka.

librdkafka calls block, so fetches run in a worker thread; rebalance callbacks (which librdkafka
runs inside that thread) hop back onto the event loop and block the fetch thread until done.
Group operations (commit, pause, resume, seek) only ever run on that fetch thread: issued
from another thread while a rebalance callback runs, librdkafka blocks them until the callback
returns — and the callback may be waiting for the event loop that issued them.
The producer lives in confluent_producer.py.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, ParamSpec, Sequence, TypeVar

from confluent_kafka import OFFSET_STORED, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from ..settings import Settings, reveal_config
from .auth_errors import LIBRDKAFKA_FAILURES, confluent_diagnose, explain, librdkafka_logger, oauth_token_fault
from .base import (
    TP,
    Admin,
    Consumer,
    Driver,
    GroupProtocol,
    Message,
    PartitionInfo,
    Producer,
    RebalanceCallback,
    TopicInfo,
    TopicSpec,
)
from .columns import Columns
from .confluent_fetched import FetchedMessage, as_columns, split
from .confluent_producer import ConfluentProducer
from .quiet import RateLimitFilter
from .security import confluent_common

_REBALANCE_TIMEOUT = 120.0
METADATA_WAIT = 4.0  # seconds an admin's metadata call waits (its callers retry)
METADATA_SLICE = 0.25  # ... in slices, reading librdkafka's log for an unhealable failure between them
log = logging.getLogger("streamkit.confluent")
_REFUSED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)  # missing ACLs
log.addFilter(RateLimitFilter())  # per-fetch client errors during an outage: one line per 30 s

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _logged(fn: Any) -> None:
    try:
        fn()
    except Exception as exc:  # fire-and-forget consumer calls (pause, resume, async commit)
        log.warning("consumer call failed: %r", exc)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _tps(tps: Sequence[TP], offset: int | None = None) -> list[TopicPartition]:
    if offset is None:
        return [TopicPartition(tp.topic, tp.partition) for tp in tps]
    return [TopicPartition(tp.topic, tp.partition, offset) for tp in tps]


def _protocol_config(protocol: GroupProtocol) -> dict[str, str]:
    if protocol is GroupProtocol.CONSUMER:
        # the broker's range assignor keeps partition p of equally sized topics on one member
        return {"group.protocol": "consumer", "group.remote.assignor": "range"}
    if protocol is GroupProtocol.COOPERATIVE:
        return {"partition.assignment.strategy": "cooperative-sticky"}
    # librdkafka's default, "range,roundrobin": every member lists both, so the group uses range.
    # (Naming range alone left a later joiner without partitions on the dev broker.)
    return {}


class ConfluentConsumer(Consumer):
    def __init__(self, settings: Settings, group_id: str | None, *,
                 protocol: GroupProtocol = GroupProtocol.EAGER, **overrides: Any) -> None:
        conf = confluent_common(settings)
        conf["logger"] = librdkafka_logger  # through Python logging: -l governs it, rate limited
        conf.update(
            {
                "group.id": group_id or f"streamkit-manual-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": settings.auto_offset_reset,
                "session.timeout.ms": settings.session_timeout_ms,
                "heartbeat.interval.ms": settings.heartbeat_interval_ms,
                "max.poll.interval.ms": settings.max_poll_interval_ms,
                # librdkafka's 1 s default backoff starves a Python consume loop (docs/architecture.md, Transport).
                "fetch.queue.backoff.ms": 10,
                # a topic the worker reads is created by it, with its settings (runtime/topic_admin.py)
                "allow.auto.create.topics": False,
            }
        )
        if settings.exactly_once:  # also makes committed-offset fetches wait for stable offsets
            conf["isolation.level"] = "read_committed"
        conf["on_commit"] = self._on_commit  # fire-and-forget commits report here (fetch thread)
        conf.update(_protocol_config(protocol))
        if protocol is GroupProtocol.CONSUMER:  # the broker owns these under KIP-848 (librdkafka refuses them)
            del conf["session.timeout.ms"], conf["heartbeat.interval.ms"]
        conf.update(reveal_config(settings.consumer_config))
        conf.update(overrides)
        self._conf = conf
        self._grouped = group_id is not None
        self._read_committed = conf.get("isolation.level") == "read_committed"
        self._client: CKConsumer | None = None
        # One thread fetches and runs every group operation (commit, pause, resume, seek):
        # between fetches, or inline while a rebalance callback blocks it (module docstring).
        # Another thread runs lookups that do not touch the group.
        self._fetch_pool = ThreadPoolExecutor(1, thread_name_prefix="streamkit-fetch")
        self._call_pool = ThreadPoolExecutor(1, thread_name_prefix="streamkit-kafka-call")
        self._loop: asyncio.AbstractEventLoop | None = None
        self.protocol = protocol
        self._subscription: tuple[list[str], Any, Any, Any] = ([], None, None, None)
        self._group_metadata: Any = None
        self._closed = False
        self._rebalancing = False
        self._rejoin_pending = False
        self._failed_commits: set[TP] = set()
        self._inline_calls: queue.Queue[tuple[Any, asyncio.Future[Any] | None]] = queue.Queue()
        self._inline_lock = threading.Lock()
        self._ordered: collections.deque[tuple[Any, asyncio.Future[Any] | None]] = collections.deque()

    @property
    def client(self) -> CKConsumer:
        assert self._client is not None, "consumer not started"
        return self._client

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._client = CKConsumer(self._conf)

    async def stop(self) -> None:
        if self._client is None or self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._fetch_pool, self._client.close)
        self._fetch_pool.shutdown(wait=False)
        self._call_pool.shutdown(wait=False)

    def _bridge(self, callback: RebalanceCallback) -> Callable[[Any, list[TopicPartition]], None]:
        def on_change(_consumer: Any, partitions: list[TopicPartition]) -> None:
            tps = [TP(p.topic, p.partition) for p in partitions]
            loop = self._loop
            assert loop is not None
            with self._inline_lock:
                self._rebalancing = True
            try:
                future = asyncio.run_coroutine_threadsafe(callback(tps), loop)
                deadline = time.monotonic() + _REBALANCE_TIMEOUT
                while time.monotonic() < deadline:
                    try:
                        item = self._inline_calls.get(timeout=0.02)
                    except queue.Empty:
                        if future.done():
                            break
                        continue
                    self._run_inline(loop, *item)
            finally:
                with self._inline_lock:
                    self._rebalancing = False
                    rejoin, self._rejoin_pending = self._rejoin_pending, False
                if rejoin:  # runs on this (the fetch) thread once the callback has returned
                    self._fetch_pool.submit(_logged, self._resubscribe)
                while True:  # calls queued just before the flag dropped still run here
                    try:
                        item = self._inline_calls.get_nowait()
                    except queue.Empty:
                        break
                    self._run_inline(loop, *item)
            future.result(0 if future.done() else 1)

        return on_change

    @staticmethod
    def _run_inline(loop: asyncio.AbstractEventLoop, fn: Any, result: asyncio.Future[Any] | None) -> None:
        try:
            value = fn()
        except BaseException as exc:  # handed back to the awaiting coroutine
            if result is None:
                log.warning("consumer call during rebalance failed: %r", exc)
            else:
                loop.call_soon_threadsafe(_settle, result, None, exc)
        else:
            if result is not None:
                loop.call_soon_threadsafe(_settle, result, value, None)

    def _inline(self, fn: Any, result: asyncio.Future[Any] | None) -> bool:
        """Queue ``fn`` for the fetch thread if a rebalance callback is blocking it."""
        with self._inline_lock:
            if not self._rebalancing:
                return False
            self._inline_calls.put((fn, result))
            return True

    def subscribe(self, topics: Sequence[str], on_assigned: RebalanceCallback, on_revoked: RebalanceCallback,
                  on_lost: RebalanceCallback | None = None) -> None:
        revoke = self._bridge(on_revoked)
        lost = revoke if on_lost is None else self._bridge(on_lost)  # librdkafka's on_lost: the session expired
        assigned = self._bridge(on_assigned)

        def assign_then_notify(consumer: Any, partitions: list[TopicPartition]) -> None:
            # Apply the assignment first, so the callback can pause partitions (for recovery).
            # Incremental protocols add to what the member keeps; eager replaces the whole set.
            if self.protocol.incremental:
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)
            # Read nothing of them until the worker has handled the assignment (it resumes them):
            # if that waits for an earlier revocation past this callback's wait, a fetch would
            # otherwise move past records the worker then drops as not (yet) its own.
            consumer.pause(partitions)
            # The generation this assignment belongs to, for transactions. Asked from any other
            # thread while a rebalance callback runs, librdkafka blocks: take it here, instantly.
            self._group_metadata = consumer.consumer_group_metadata()
            assigned(consumer, partitions)

        self._subscription = (list(topics), assign_then_notify, revoke, lost)
        self.client.subscribe(list(topics), on_assign=assign_then_notify, on_revoke=revoke, on_lost=lost)

    def rejoin(self) -> None:
        """Leave and join again. Asked while a rebalance callback runs (it cannot leave the group
        from inside one), it happens right after that callback: an incremental rebalance keeps
        the member's other partitions, so skipping it would leave the fenced ones behind."""
        with self._inline_lock:
            if self._rebalancing:
                self._rejoin_pending = True
                return
        self._fetch_pool.submit(_logged, self._resubscribe)

    def _resubscribe(self) -> None:
        topics, on_assign, on_revoke, on_lost = self._subscription
        self.client.unsubscribe()
        self.client.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    async def position(self, tp: TP) -> int | None:
        [part] = await self._call(self.client.position, [TopicPartition(*tp)])
        return part.offset if part.offset >= 0 else None

    async def check_connection(self, timeout: float) -> None:
        # Not the call pool: a lookup stuck there during an outage would hold up the others.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: self.client.list_topics(timeout=timeout))

    def group_metadata(self) -> Any:
        """The metadata taken when the current assignment arrived, refreshed after every poll."""
        if self._group_metadata is None:
            raise RuntimeError("no group assignment yet")
        return self._group_metadata

    async def assign(self, tps: Sequence[TP], offsets: dict[TP, int] | None = None) -> None:
        offsets = offsets or {}
        self.client.assign([TopicPartition(tp.topic, tp.partition, offsets.get(tp, OFFSET_STORED)) for tp in tps])

    async def getmany(self, timeout: float, max_records: int) -> dict[TP, list[Message]]:
        return split(await self._fetched(timeout, max_records), self._refused, FetchedMessage)

    async def getmany_columns(self, timeout: float, max_records: int) -> dict[TP, Columns]:
        return as_columns(split(await self._fetched(timeout, max_records), self._refused))

    async def _fetched(self, timeout: float, max_records: int) -> list[Any]:
        return await asyncio.get_running_loop().run_in_executor(self._fetch_pool, self._fetch, max_records, timeout)

    def _refused(self, err: KafkaError) -> bool:
        """Errors a fetch raises: fatal ones, and a missing ACL (no retry grants it)."""
        return err.fatal() or (self._grouped and err.code() in _REFUSED)

    def _fetch(self, max_records: int, timeout: float) -> list[Any]:
        """What has arrived, as soon as anything has: ``consume(n, timeout)`` alone waits for
        ``n`` records or the whole timeout, which at a moderate rate is pure latency."""
        first = self.client.poll(timeout)
        if self._group_metadata is not None:
            # Rebalance callbacks run inside poll; incremental protocols (KIP-848 bumps the member
            # epoch on every change, also for members that keep their partitions) may change
            # the group's epoch without an assignment arriving here: a transaction must carry
            # the current one, so take it after every poll, on the thread that owns the group.
            self._group_metadata = self.client.consumer_group_metadata()
        if first is None:
            return []
        return [first, *self.client.consume(max_records - 1, 0)] if max_records > 1 else [first]

    def assignment(self) -> set[TP]:
        return {TP(p.topic, p.partition) for p in self.client.assignment()}

    def _submit(self, fn: Any) -> None:
        """Run ``fn`` on the fetch thread without waiting: inline if a rebalance callback is
        blocking that thread, else right after the current fetch. Group operations (commit,
        pause, resume, seek) issued from any other thread can block until a running rebalance
        callback returns — and that callback may be waiting for the event loop."""
        self._in_order(fn, None)

    async def _on_fetch_thread(self, fn: Any) -> Any:
        result = asyncio.get_running_loop().create_future()
        self._in_order(fn, result)
        return await result

    def _in_order(self, fn: Any, result: asyncio.Future[Any] | None) -> None:
        """Queue a group operation; whichever runs first of the pool's turn and a rebalance
        callback's inline turn runs everything queued so far, in the order it was asked. (A pause
        queued behind a fetch and a resume asked inline during the rebalance that fetch ran into
        would otherwise run resume-then-pause, leaving the partition paused for good.)"""
        with self._inline_lock:
            self._ordered.append((fn, result))
        if not self._inline(self._run_ordered, None):
            self._fetch_pool.submit(_logged, self._run_ordered)

    def _run_ordered(self) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            with self._inline_lock:
                if not self._ordered:
                    return
                fn, result = self._ordered.popleft()
            self._run_inline(loop, fn, result)

    def pause(self, tps: Sequence[TP]) -> None:
        if tps:
            parts = _tps(tps)
            self._submit(lambda: self.client.pause(parts))

    def resume(self, tps: Sequence[TP]) -> None:
        if tps:
            parts = _tps(tps)
            self._submit(lambda: self.client.resume(parts))

    async def _call(self, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Lookups that do not touch the group (watermarks, committed offsets): another thread."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[_R] = loop.create_future()
        if self._inline(lambda: fn(*args, **kwargs), result):  # the callback blocks the fetch thread
            return await result
        return await loop.run_in_executor(self._call_pool, lambda: fn(*args, **kwargs))

    async def seek(self, tp: TP, offset: int) -> None:
        part = TopicPartition(tp.topic, tp.partition, offset)
        await self._on_fetch_thread(lambda: self.client.seek(part))


    def _on_commit(self, err: Any, partitions: list[TopicPartition]) -> None:
        failed = {TP(p.topic, p.partition) for p in partitions if err is not None or p.error is not None}
        if failed:
            log.info("an offset commit was refused (%s): the next checkpoint sends it again",
                     err or next(p.error for p in partitions if p.error is not None))
            with self._inline_lock:
                self._failed_commits |= failed

    def take_failed_commits(self) -> set[TP]:
        with self._inline_lock:
            failed, self._failed_commits = self._failed_commits, set()
        return failed

    async def commit(self, offsets: dict[TP, int], *, wait: bool = True) -> None:
        parts = [TopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        if not wait:
            # A synchronous commit issued while a rebalance callback is pending waits for that
            # callback, which may itself wait for this checkpoint: never block here.
            self._submit(lambda: self.client.commit(offsets=parts, asynchronous=True))
            return
        await self._on_fetch_thread(lambda: self.client.commit(offsets=parts, asynchronous=False))

    async def committed(self, tps: Sequence[TP]) -> dict[TP, int | None]:
        parts = await self._call(self.client.committed, _tps(tps), timeout=10)
        return {TP(p.topic, p.partition): (p.offset if p.offset >= 0 else None) for p in parts}

    def highwater(self, tp: TP) -> int | None:
        try:
            _low, high = self.client.get_watermark_offsets(TopicPartition(*tp), cached=True)
        except KafkaException:
            return None
        return high if high >= 0 else None

    def fetched_end(self, tp: TP) -> tuple[int | None, bool]:
        # librdkafka caches the high watermark only, also under read_committed
        return self.highwater(tp), not self._read_committed

    METADATA_WAIT = 30.0  # seconds a partition may stay unknown to a fresh client (then it is an error)

    async def end_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        out = {}
        for tp in tps:
            _low, high = await self._watermarks(TopicPartition(*tp))
            out[tp] = high
        return out

    async def beginning_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        return {tp: (await self._watermarks(TopicPartition(*tp)))[0] for tp in tps}

    async def _watermarks(self, part: TopicPartition) -> tuple[int, int]:
        """``get_watermark_offsets``, waiting while librdkafka says the partition is unknown or
        led by another broker: a fresh client (a restore's consumer) asks before its first
        metadata arrives, which after a broker outage takes a while, and right after one the
        client's leader may be stale until its metadata refresh. The topics exist (the worker made sure at start), so once
        the broker answers this is bounded by ``METADATA_WAIT``, then the error stands; while the
        broker cannot be reached at all (a metadata request fails too) the wait goes on, as every
        wait for the broker does: an outage of any length is waited out."""
        loop = asyncio.get_running_loop()
        deadline, delay, logged = loop.time() + self.METADATA_WAIT, 0.05, 0.0
        started = loop.time()
        while True:
            try:
                return await self._call(self.client.get_watermark_offsets, part, timeout=10)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not (isinstance(err, KafkaError) and err.code() in _METADATA_PENDING):
                    raise
                if loop.time() + delay > deadline:
                    known = await self._known(part)
                    if known is False:
                        raise  # the broker answers and has no such partition
                    deadline = loop.time() + self.METADATA_WAIT  # it has it now, or the broker is away
                    if known is None and loop.time() - logged >= 30:
                        logged = loop.time()
                        log.warning("%s[%d]: no metadata, broker unreachable for %.0fs; waiting for it",
                                    part.topic, part.partition, loop.time() - started)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _known(self, part: TopicPartition) -> bool | None:
        """Whether the broker's metadata has ``part`` (the client has it too now); None while no
        broker answers a metadata request."""
        try:
            meta = await self._call(self.client.list_topics, part.topic, timeout=5)
        except KafkaException:
            return None
        topic = meta.topics.get(part.topic)
        return topic is not None and part.partition in (topic.partitions or {})


# librdkafka's answers while the client's metadata is not there yet or not current
_METADATA_PENDING = frozenset((KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
                               KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE))


class ConfluentAdmin(Admin):
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._conf = {**confluent_common(settings), "logger": librdkafka_logger}
        self._client: AdminClient | None = None

    async def start(self) -> None:
        LIBRDKAFKA_FAILURES.clear()  # what this connection attempt reports
        # librdkafka would wait 10 s for the token, and not say why
        if await asyncio.to_thread(oauth_token_fault, self._settings):
            raise ConnectionError("sasl_oauth_token gives no usable token")
        self._client = AdminClient(self._conf)

    async def diagnose(self) -> str | None:
        if self._client is not None:
            self._client.poll(0)  # serves the log queue: the failure lines reach librdkafka_log
        return await confluent_diagnose(self._settings)

    async def stop(self) -> None:
        self._client = None

    def _metadata(self, client: AdminClient, wait: float) -> Any:
        """``list_topics`` in short slices: a failure no retry heals (bad credentials, an untrusted
        certificate) is in librdkafka's log within milliseconds; waiting out the whole ``wait``
        before reading it made every misconfiguration take seconds to report."""
        deadline = time.monotonic() + wait
        while True:
            try:
                return client.list_topics(timeout=min(METADATA_SLICE, max(0.05, deadline - time.monotonic())))
            except KafkaException:
                client.poll(0)  # serves the log queue: the failure lines reach librdkafka_log
                if time.monotonic() >= deadline or any(explain(line, self._settings) for line in LIBRDKAFKA_FAILURES):
                    raise

    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        assert self._client is not None
        if not specs:
            return
        new = [NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replicas, config=dict(s.config))
               for s in specs]
        futures = self._client.create_topics(new, request_timeout=15)
        for fut in futures.values():
            try:
                await asyncio.wrap_future(fut)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        assert self._client is not None
        client = self._client
        loop = asyncio.get_running_loop()
        meta = await loop.run_in_executor(None, lambda: self._metadata(client, METADATA_WAIT))  # callers retry
        out = {}
        for name, topic in meta.topics.items():
            if topic.error is not None or (names and name not in names) or not topic.partitions:
                continue
            first = next(iter(topic.partitions.values()))
            out[name] = TopicInfo(name, len(topic.partitions), len(first.replicas))
        return out

    async def describe_partitions(self, names: Sequence[str]) -> dict[str, list[PartitionInfo]]:
        assert self._client is not None
        client = self._client
        meta = await asyncio.get_running_loop().run_in_executor(None, lambda: self._metadata(client, METADATA_WAIT))
        return {name: [PartitionInfo(p.id, p.leader, list(p.replicas), list(p.isrs))
                       for p in sorted(topic.partitions.values(), key=lambda p: p.id)]
                for name, topic in meta.topics.items() if name in names and topic.error is None}

    async def delete_topics(self, names: Sequence[str]) -> dict[str, str]:
        assert self._client is not None
        refused: dict[str, str] = {}
        if not names:
            return refused
        for name, fut in self._client.delete_topics(list(names), request_timeout=30).items():
            try:
                await asyncio.wrap_future(fut)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    refused[name] = exc.args[0].str()
        return refused

    async def topic_configs(self, names: Sequence[str], *, set_only: bool = False) -> dict[str, dict[str, str]]:
        assert self._client is not None
        out: dict[str, dict[str, str]] = {}
        if not names:
            return out
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
        for resource, fut in self._client.describe_configs(resources, request_timeout=15).items():
            try:
                entries = await asyncio.wrap_future(fut)
            except KafkaException:  # absent, or not describable here: nothing to check
                continue
            out[resource.name] = {name: entry.value for name, entry in entries.items() if entry.value is not None
                                  and not (set_only and entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value)}
        return out

    async def delete_records(self, before: dict[TP, int]) -> dict[TP, str]:
        assert self._client is not None
        refused: dict[TP, str] = {}
        if not before:
            return refused
        futures = self._client.delete_records([TopicPartition(tp.topic, tp.partition, offset)
                                               for tp, offset in before.items()], request_timeout=30)
        for tp, fut in futures.items():
            try:
                await asyncio.wrap_future(fut)
            except KafkaException as exc:
                refused[TP(tp.topic, tp.partition)] = exc.args[0].str()
        return refused

    async def group_offsets(self, group: str) -> dict[TP, int]:
        assert self._client is not None
        futures = self._client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
        listed = await asyncio.wrap_future(futures[group])
        return {TP(p.topic, p.partition): p.offset for p in listed.topic_partitions or [] if p.offset >= 0}

    async def delete_group(self, group: str) -> str | None:
        assert self._client is not None
        for fut in self._client.delete_consumer_groups([group], request_timeout=30).values():
            try:
                await asyncio.wrap_future(fut)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() not in (KafkaError.GROUP_ID_NOT_FOUND,):
                    return error.str()
        return None

    async def set_group_config(self, group: str, values: dict[str, str]) -> dict[str, str]:
        assert self._client is not None
        refused: dict[str, str] = {}
        for name, value in values.items():  # one request each: one refusal must not hide the others
            entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            futures = self._client.incremental_alter_configs(
                [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])], request_timeout=15)
            for fut in futures.values():
                try:
                    await asyncio.wrap_future(fut)
                except KafkaException as exc:
                    refused[name] = exc.args[0].str()
        return refused


class ConfluentDriver(Driver):
    name = "confluent"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def consumer(self, group_id: str | None, *, protocol: GroupProtocol = GroupProtocol.EAGER,
                 **overrides: Any) -> Consumer:
        return ConfluentConsumer(self.settings, group_id, protocol=protocol, **overrides)

    def producer(self, **overrides: Any) -> Producer:
        return ConfluentProducer(self.settings, **overrides)

    def admin(self) -> Admin:
        return ConfluentAdmin(self.settings)
