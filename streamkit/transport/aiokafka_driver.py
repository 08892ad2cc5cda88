"""The default driver: aiokafka, pure asyncio."""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.errors import (
    GroupIdNotFound,
    InvalidProducerEpoch,
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokafka.errors import ProducerFenced as KafkaProducerFenced
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.protocol.commit import OffsetCommitRequest

from ..errors import ConfigurationError, ProducerFenced, TransactionAborted
from ..settings import Settings, reveal_config
from .aiokafka_batches import BatchedSends, keep_in_metadata, transaction_error
from .aiokafka_diagnosis import aiokafka_diagnose
from .aiokafka_fetched import as_message, as_messages
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
from .partitioner import default_partitioner
from .pending import PendingDeliveries
from .quiet import quiet_client_logs, with_reconnect_backoff
from .security import aiokafka_common, compression

log = logging.getLogger(__name__)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no type hints
    def __init__(self, on_assigned: RebalanceCallback, on_revoked: RebalanceCallback,
                 on_lost: RebalanceCallback | None = None, session_lost: Callable[[], bool] = lambda: False) -> None:
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost or on_revoked
        self._session_lost = session_lost

    async def on_partitions_revoked(self, revoked: Any) -> None:
        """aiokafka has no callback of its own for lost partitions: a revocation that comes after
        the coordinator reset the member's generation (a heartbeat, commit or join answered
        that the member is unknown or its generation stale) is one."""
        tps = [TP(tp.topic, tp.partition) for tp in revoked]
        await (self._on_lost if tps and self._session_lost() else self._on_revoked)(tps)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._on_assigned([TP(tp.topic, tp.partition) for tp in assigned])


def _tps(tps: Sequence[TP]) -> list[TopicPartition]:
    return [TopicPartition(tp.topic, tp.partition) for tp in tps]


class AiokafkaConsumer(Consumer):
    def __init__(self, settings: Settings, group_id: str | None, **overrides: Any) -> None:
        opts = aiokafka_common(settings)
        opts.update(
            group_id=group_id,
            client_id=f"streamkit-{uuid.uuid4().hex[:8]}",
            enable_auto_commit=False,
            auto_offset_reset=settings.auto_offset_reset,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            max_poll_interval_ms=settings.max_poll_interval_ms,
            max_poll_records=settings.fetch_max_records,
            # Range keeps partition p of every equally sized topic on one member: tables are
            # co-partitioned with their sources (aiokafka's default, round robin, is not).
            partition_assignment_strategy=(RangePartitionAssignor,),
            isolation_level=settings.isolation_level,
        )
        opts.update(reveal_config(settings.consumer_config))
        opts.update(overrides)
        self._client = AIOKafkaConsumer(**opts)
        with_reconnect_backoff(self._client._client)  # noqa: SLF001 - aiokafka's admin exposes no public client
        self._group_id = group_id
        self._read_committed = opts.get("isolation_level") == "read_committed"
        self._subscription: tuple[list[str], Any] = ([], None)

    async def start(self) -> None:
        await self._client.start()

    async def stop(self) -> None:
        await self._client.stop()

    def subscribe(self, topics: Sequence[str], on_assigned: RebalanceCallback, on_revoked: RebalanceCallback,
                  on_lost: RebalanceCallback | None = None) -> None:
        self._subscription = (list(topics), _Listener(on_assigned, on_revoked, on_lost, self._session_lost))
        self._client.subscribe(topics=list(topics), listener=self._subscription[1])

    def _session_lost(self) -> bool:
        """The coordinator forgot this member's generation (aiokafka resets it to -1 when the
        group answers that the member is unknown or stale): commits would be refused."""
        coordinator = getattr(self._client, "_coordinator", None)
        return coordinator is not None and coordinator.generation == OffsetCommitRequest.DEFAULT_GENERATION_ID

    def rejoin(self) -> None:
        topics, listener = self._subscription
        self._client.unsubscribe()
        self._client.subscribe(topics=topics, listener=listener)

    async def position(self, tp: TP) -> int | None:
        position: int | None = await self._client.position(TopicPartition(*tp))  # aiokafka ships no type hints
        return position

    async def check_connection(self, timeout: float) -> None:
        await asyncio.wait_for(self._client._client.fetch_all_metadata(), timeout)  # noqa: SLF001 - aiokafka's admin exposes no public client

    def group_metadata(self) -> Any:
        return self._group_id  # aiokafka sends offsets by group id only (EOS v1)

    async def assign(self, tps: Sequence[TP], offsets: dict[TP, int] | None = None) -> None:
        self._client.assign(_tps(tps))
        for tp, offset in (offsets or {}).items():
            self._client.seek(TopicPartition(*tp), offset)

    async def getmany(self, timeout: float, max_records: int) -> dict[TP, list[Message]]:
        fetched = await self._client.getmany(timeout_ms=int(timeout * 1000), max_records=max_records)
        return {TP(tp.topic, tp.partition): as_messages(records, tp.partition) for tp, records in fetched.items()}

    async def getmany_columns(self, timeout: float, max_records: int) -> dict[TP, Columns]:
        """Fields straight from aiokafka's records; a ``Message`` only for a record asked for."""
        fetched = await self._client.getmany(timeout_ms=int(timeout * 1000), max_records=max_records)
        return {TP(tp.topic, tp.partition): Columns([r.offset for r in records], [r.key for r in records],
                                                    [r.value for r in records], records, as_message)
                for tp, records in fetched.items()}

    def assignment(self) -> set[TP]:
        return {TP(tp.topic, tp.partition) for tp in self._client.assignment()}

    def pause(self, tps: Sequence[TP]) -> None:
        self._client.pause(*_tps(tps))

    def resume(self, tps: Sequence[TP]) -> None:
        self._client.resume(*_tps(tps))

    async def seek(self, tp: TP, offset: int) -> None:
        self._client.seek(TopicPartition(*tp), offset)


    async def commit(self, offsets: dict[TP, int], *, wait: bool = True) -> None:
        await self._client.commit({TopicPartition(*tp): off for tp, off in offsets.items()})

    async def committed(self, tps: Sequence[TP]) -> dict[TP, int | None]:
        return {tp: await self._client.committed(TopicPartition(*tp)) for tp in tps}

    def highwater(self, tp: TP) -> int | None:
        try:
            highwater: int | None = self._client.highwater(TopicPartition(*tp))  # aiokafka ships no type hints
            return highwater
        except Exception:  # not assigned any more
            return None

    def fetched_end(self, tp: TP) -> tuple[int | None, bool]:
        if self._read_committed:
            try:
                stable = self._client.last_stable_offset(TopicPartition(*tp))
            except Exception:  # not assigned any more
                return None, False
            return (stable, True) if stable is not None and stable >= 0 else (None, False)
        return self.highwater(tp), True

    async def end_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        ends = await self._client.end_offsets(_tps(tps))
        return {TP(tp.topic, tp.partition): off for tp, off in ends.items()}

    async def beginning_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        starts = await self._client.beginning_offsets(_tps(tps))
        return {TP(tp.topic, tp.partition): off for tp, off in starts.items()}


# aiokafka keeps one produce request in flight per broker and one batch per partition queued
# behind it, so under load a partition moves one batch per round trip: at aiokafka's 16 KiB
# (~150 records of 100 bytes) a backlog took a round trip per 150 records (latency runs: 340-460
# ms at p99), and every batch costs Python work. Bigger batches only fill under load (linger_ms
# sends what is open), below Kafka's 1 MB max.message.bytes (a topic set lower needs a lower
# one: aiokafka does not split a refused batch); producer_config's max_batch_size wins.
MAX_BATCH_SIZE = 256 * 1024


class AiokafkaProducer(Producer):
    def __init__(self, settings: Settings, **overrides: Any) -> None:
        opts = aiokafka_common(settings)
        acks: Any = settings.acks if settings.acks == "all" else int(settings.acks)
        opts.update(acks=acks, compression_type=compression(settings), linger_ms=settings.linger_ms,
                    partitioner=default_partitioner,  # aiokafka's placement, with memoised hashes
                    max_batch_size=MAX_BATCH_SIZE)
        if overrides.get("transactional_id"):
            opts.update(enable_idempotence=True, transaction_timeout_ms=settings.transaction_timeout_ms)
        opts.update(reveal_config(settings.producer_config))
        opts.update(overrides)
        self._client = AIOKafkaProducer(**opts)
        with_reconnect_backoff(self._client.client)
        self._pending = PendingDeliveries()
        # a partitioner of the user's own (producer_config) places records: aiokafka's send only
        custom_placement = "partitioner" in settings.producer_config or "partitioner" in overrides
        self._batches = None if custom_placement else BatchedSends(self._client, opts["linger_ms"], self._pending,
                                                                   opts["max_batch_size"])

    async def start(self) -> None:
        await self._client.start()

    async def stop(self) -> None:
        if self._batches is not None:
            try:
                await self._batches.hand_over()  # as aiokafka's stop delivers what it holds
            finally:
                await self._batches.stop()
        await self._client.stop()

    def try_send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None,
                 headers: list[tuple[str, bytes]] | None = None, timestamp: int | None = None) -> bool:
        """An untracked send into a per-partition batch (aiokafka_batches.py): no coroutine, no
        future per record."""
        batches = self._batches
        return batches is not None and batches.try_add(topic, key, value, partition, headers, timestamp)

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
        track: bool = True,
    ) -> asyncio.Future[Any]:
        batches = self._batches
        if batches is not None:
            fut = asyncio.get_running_loop().create_future()
            if batches.try_add(topic, key, value, partition, headers, timestamp, fut):
                return fut  # its batch's delivery is checked at flush: no need to add it here
            if batches.queued:
                await batches.hand_over()  # records queued before this one go before it
        keep_in_metadata(self._client, topic)
        sent: asyncio.Future[Any] = await self._client.send(
            topic, value=value, key=key, partition=partition, timestamp_ms=timestamp, headers=headers
        )
        self._pending.add(sent, topic)
        return sent

    async def flush(self) -> None:
        if self._batches is not None:
            await self._batches.hand_over()
        await self._client.flush()
        await self._pending.settle()

    async def partitions_for(self, topic: str) -> int:
        return len(await self._client.partitions_for(topic))

    # -- transactions (the transactional id is registered, fencing older producers, in start) --

    async def _txn_call(self, what: str, call: Any) -> None:
        try:
            await call
        except (KafkaProducerFenced, InvalidProducerEpoch) as exc:
            raise ProducerFenced(f"{what}: {exc!r}") from exc
        except KafkaError as exc:
            raise TransactionAborted(f"{what}: {exc!r}") from exc

    async def init_transactions(self) -> None:
        """aiokafka registers the transactional id when the producer starts."""

    async def begin_transaction(self) -> None:
        await self._txn_call("begin_transaction", self._client.begin_transaction())

    async def send_offsets_to_transaction(self, offsets: dict[TP, int], group: Any) -> None:
        parts = {TopicPartition(*tp): off for tp, off in offsets.items()}
        await self._txn_call("send_offsets_to_transaction", self._client.send_offsets_to_transaction(parts, group))

    async def commit_transaction(self) -> None:
        if self._batches is not None:
            await self._batches.hand_over()  # aiokafka's commit delivers what it holds: so must we
        await self._txn_call("commit_transaction", self._client.commit_transaction())
        self._pending.discard()  # the checkpoint flushed and checked every send before committing

    async def abort_transaction(self) -> None:
        if self._batches is not None:
            self._batches.discard()  # never handed over: aborted with the transaction
        cause = transaction_error(self._client)  # read before aiokafka replaces it with a fresh future
        if cause is not None:
            log.debug("aborting a transaction that failed: %r", cause)
        await self._txn_call("abort_transaction", self._client.abort_transaction())
        self._pending.discard()


class AiokafkaAdmin(Admin):
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client = AIOKafkaAdminClient(**aiokafka_common(settings))
        with_reconnect_backoff(self._client._client)  # noqa: SLF001 - aiokafka's admin exposes no public client

    async def diagnose(self) -> str | None:
        return await aiokafka_diagnose(self._settings)

    async def start(self) -> None:
        await self._client.start()

    async def stop(self) -> None:
        await self._client.close()

    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        for spec in specs:  # one request each: an existing topic must not fail the others
            try:
                response = await self._client.create_topics(
                    [NewTopic(spec.name, spec.partitions, spec.replicas, topic_configs=dict(spec.config))]
                )
            except TopicAlreadyExistsError:
                continue
            for _topic, code, *_ in getattr(response, "topic_errors", ()):  # aiokafka returns, not raises, these
                if code == TopicAuthorizationFailedError.errno:
                    raise TopicAuthorizationFailedError(spec.name)

    async def delete_topics(self, names: Sequence[str]) -> dict[str, str]:
        if not names:
            return {}
        response = await self._client.delete_topics(list(names))
        return {name: str(for_code(code)) for name, code, *_ in response.topic_error_codes
                if code not in (0, UnknownTopicOrPartitionError.errno)}

    async def topic_configs(self, names: Sequence[str], *, set_only: bool = False) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if not names:
            return out
        responses = await self._client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in names])
        for response in responses:
            for error_code, _message, _kind, name, entries, *_ in response.resources:
                if error_code == 0:  # absent, or not describable here: nothing to check
                    out[name] = {entry[0]: entry[1] for entry in entries
                                 if entry[1] is not None and not (set_only and not _set_on_topic(entry))}
        return out

    async def delete_records(self, before: dict[TP, int]) -> dict[TP, str]:
        refused: dict[TP, str] = {}
        for tp, offset in before.items():  # one request each: aiokafka raises the first error of a request
            try:
                await self._client.delete_records({TopicPartition(tp.topic, tp.partition): RecordsToDelete(offset)},
                                                  timeout_ms=30000)
            except Exception as exc:  # the broker's refusal, or no leader: the next purge tries again
                refused[tp] = repr(exc)
        return refused

    async def group_offsets(self, group: str) -> dict[TP, int]:
        # every partition named: an OffsetFetch for "all topics" makes the dev broker drop the connection
        partitions = [TopicPartition(topic["topic"], p.get("partition", p.get("partition_index")))
                      for topic in await self._client.describe_topics(None) if topic.get("error_code", 0) == 0
                      for p in topic["partitions"]]
        if not partitions:
            return {}
        listed = await self._client.list_consumer_group_offsets(group, partitions=partitions)
        return {TP(tp.topic, tp.partition): meta.offset for tp, meta in listed.items() if meta.offset >= 0}

    async def delete_group(self, group: str) -> str | None:
        coordinator = await self._client.find_coordinator(group)
        response = await self._client._send_request_to_node(coordinator, DeleteGroupsRequest([group]))  # noqa: SLF001 - aiokafka's admin has no DeleteGroups call
        for _name, code in response.results:
            if code not in (0, GroupIdNotFound.errno):
                return str(for_code(code))
        return None

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        # Always ask for all topics: a metadata request naming topics may auto-create them.
        described = await self._client.describe_topics(None)
        out: dict[str, TopicInfo] = {}
        for topic in described:
            if names and topic["topic"] not in names:
                continue
            if topic.get("error_code", 0) != 0 or not topic.get("partitions"):
                continue
            parts = topic["partitions"]
            first = parts[0]  # aiokafka's metadata names them "replicas" (newer schemas: "replica_nodes")
            replicas = first.get("replicas", first.get("replica_nodes", []))
            out[topic["topic"]] = TopicInfo(topic["topic"], len(parts), len(replicas))
        return out

    async def describe_partitions(self, names: Sequence[str]) -> dict[str, list[PartitionInfo]]:
        out: dict[str, list[PartitionInfo]] = {}
        for topic in await self._client.describe_topics(None):  # all: naming topics may auto-create them
            if topic["topic"] not in names or topic.get("error_code", 0) != 0:
                continue
            parts = [PartitionInfo(p.get("partition", p.get("partition_index", -1)), p.get("leader", p.get("leader_id", -1)),
                                   list(p.get("replicas", p.get("replica_nodes", []))),
                                   list(p.get("isr", p.get("isr_nodes", [])))) for p in topic["partitions"]]
            out[topic["topic"]] = sorted(parts, key=lambda p: p.partition)
        return out


def _set_on_topic(entry: Any) -> bool:
    """A DescribeConfigs entry set on the topic: v0 says is_default, later versions the source
    (1: DYNAMIC_TOPIC_CONFIG)."""
    if len(entry) == 5:
        return not entry[3]
    return bool(entry[3] == 1)


def reads_changelogs_with_librdkafka(settings: Settings) -> bool:
    """The aiokafka driver's changelog reader is librdkafka's unless ``consumer_config`` holds
    aiokafka-native settings (what it needs: e.g. an ACL on its group-less group's coordinator)."""
    return not settings.consumer_config


class AiokafkaDriver(Driver):
    name = "aiokafka"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        quiet_client_logs()

    def consumer(self, group_id: str | None, *, protocol: GroupProtocol = GroupProtocol.EAGER,
                 **overrides: Any) -> Consumer:
        if protocol.incremental:
            raise ConfigurationError(f"aiokafka cannot rebalance with {protocol.value!r}: it speaks only the "
                                     "eager protocol (use driver='confluent')")
        return AiokafkaConsumer(self.settings, group_id, **overrides)

    def changelog_reader(self) -> Consumer:
        """librdkafka, which confluent-kafka (a dependency) ships: it parses fetches in C on its
        own threads, and restores ran ~1.4x faster with it than with aiokafka on Kafka 4.1
        (docs/decisions/0011-changelogs-read-by-librdkafka.md). aiokafka where ``consumer_config`` holds native
        settings: they are aiokafka's, librdkafka would refuse or misread them."""
        if not reads_changelogs_with_librdkafka(self.settings):
            return self.consumer(None)
        from .confluent_driver import ConfluentConsumer

        return ConfluentConsumer(self.settings, None)

    def producer(self, **overrides: Any) -> Producer:
        return AiokafkaProducer(self.settings, **overrides)

    def admin(self) -> Admin:
        return AiokafkaAdmin(self.settings)
