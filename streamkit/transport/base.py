"""The one small interface every Kafka driver implements.

The runtime talks only to these classes, so aiokafka, librdkafka and the in-memory broker are
interchangeable. Everything is batch-shaped: a fetch returns many records per partition.
"""
from __future__ import annotations

import abc
import asyncio
import logging
import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, NamedTuple, Sequence

from ..errors import TransactionsUnsupported
from .message import Headers as Headers
from .message import Message as Message

if TYPE_CHECKING:
    from .columns import Columns

log = logging.getLogger("streamkit.transport")


# librdkafka's KafkaError names for "no broker answers" (by name: this module imports no client)
_LIBRDKAFKA_BROKER_AWAY = frozenset(("_ALL_BROKERS_DOWN", "_TIMED_OUT"))


def is_retriable(exc: BaseException) -> bool:
    """True for a failure a client reports while the broker is unreachable or busy: the same
    call may be made again (aiokafka and the memory broker mark their errors ``retriable``;
    librdkafka says so on the KafkaError inside its exception)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(type(current), "retriable", None) is True or getattr(current, "retriable", None) is True:
            return True
        inner = current.args[0] if current.args else None
        check = getattr(inner, "retriable", None)
        if callable(check) and check():
            return True
        name = getattr(inner, "name", None)  # librdkafka's local errors for a broker away, not flagged retriable
        if callable(name) and name() in _LIBRDKAFKA_BROKER_AWAY:
            return True
        if isinstance(current, (ConnectionError, asyncio.TimeoutError)):
            return True
        current = current.__cause__
    return False


async def retry_while_unreachable(call: Callable[[], Awaitable[Any]], what: str, *,
                                  max_delay: float = 5.0) -> Any:
    """Await ``call()`` until it succeeds or fails with a non-retriable error: an outage of any
    length is waited out (with backoff and one log line per 30 s), never turned into data loss."""
    loop = asyncio.get_running_loop()
    delay, started, logged = 0.1, loop.time(), 0.0
    while True:
        try:
            return await call()
        except Exception as exc:
            if not is_retriable(exc):
                raise
            waited = loop.time() - started
            if not logged or waited - logged >= 30:
                logged = waited or 0.001
                log.warning("%s: broker unreachable for %.0fs, retrying: %r", what, waited, exc)
        await asyncio.sleep(delay * random.uniform(0.8, 1.2))
        delay = min(delay * 2, max_delay)


class TP(NamedTuple):
    """A topic partition."""

    topic: str
    partition: int


def delivery_position(result: Any) -> tuple[int, int]:
    """``(partition, offset)`` from any driver's delivery result."""
    if hasattr(result, "offset"):  # aiokafka's RecordMetadata (a NamedTuple of more fields)
        return result.partition, result.offset
    position: tuple[int, int] = result  # the other drivers': (partition, offset) already
    return position


def keys_and_values(messages: Sequence[Any]) -> tuple[list[bytes | None], list[bytes | None]]:
    """Every record's key and value, in two lists. A driver whose message type reads its fields
    through calls (librdkafka's) gives it a ``keys_and_values`` of its own, in C-level loops."""
    own: Callable[[Sequence[Any]], tuple[list[bytes | None], list[bytes | None]]] | None = getattr(
        type(messages[0]), "keys_and_values", None)
    if own is not None:
        return own(messages)
    return [m.key for m in messages], [m.value for m in messages]


def stamps_and_offsets(messages: Sequence[Any]) -> tuple[list[int | None], list[int]]:
    """Every record's timestamp (ms) and offset, in two lists; a driver whose message type reads
    them through calls gives it a ``stamps_and_offsets`` of its own, as ``keys_and_values``."""
    own: Callable[[Sequence[Any]], tuple[list[int | None], list[int]]] | None = getattr(
        type(messages[0]), "stamps_and_offsets", None)
    if own is not None:
        return own(messages)
    return [m.timestamp_ms for m in messages], [m.offset for m in messages]


@dataclass
class TopicSpec:
    """What a topic should look like when the app creates it."""

    name: str
    partitions: int
    replicas: int = 1
    config: dict[str, str] = field(default_factory=dict)


@dataclass
class TopicInfo:
    """What the broker says a topic looks like."""

    name: str
    partitions: int
    replicas: int


@dataclass
class PartitionInfo:
    """Where one partition lives (``streamkit topics describe``): broker ids."""

    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


# a coroutine function: the confluent driver runs it from librdkafka's thread (run_coroutine_threadsafe)
RebalanceCallback = Callable[[list[TP]], Coroutine[Any, Any, None]]


class GroupProtocol(StrEnum):
    """How a group consumer takes part in rebalances (chosen by runtime/rebalancing.py).

    EAGER: classic protocol, range assignor: every rebalance revokes every partition first.
    COOPERATIVE: classic protocol, cooperative-sticky: only moved partitions are revoked.
    CONSUMER: KIP-848, the broker's range assignor: incremental, and partition p of every
    equally sized topic stays on one member (co-partitioning)."""

    EAGER = "eager"
    COOPERATIVE = "cooperative-sticky"
    CONSUMER = "consumer"

    @property
    def incremental(self) -> bool:
        return self is not GroupProtocol.EAGER


class Consumer(abc.ABC):
    """A group consumer (or, with ``assign``, a manual one) that fetches batches."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    def subscribe(
        self, topics: Sequence[str], on_assigned: RebalanceCallback, on_revoked: RebalanceCallback,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group for ``topics``; callbacks run before fetching resumes. ``on_lost``
        (default: ``on_revoked``) is for partitions the group took away while this member could
        not answer (its session expired): another member may own them already, and the group
        refuses this member's commits for them."""

    @abc.abstractmethod
    async def assign(self, tps: Sequence[TP], offsets: dict[TP, int] | None = None) -> None:
        """Read ``tps`` without a group (reply topics, tools), from ``offsets`` where given."""

    @abc.abstractmethod
    async def getmany(self, timeout: float, max_records: int) -> dict[TP, list[Message]]:
        """Return what is ready, per partition, waiting at most ``timeout`` seconds."""

    async def getmany_columns(self, timeout: float, max_records: int) -> dict[TP, "Columns"]:
        """``getmany`` for a bulk reader: each partition's offsets, keys and values as lists
        (columns.py). Drivers that can build them without a ``Message`` per record do."""
        from .columns import Columns

        return {tp: Columns.of(messages) for tp, messages in (await self.getmany(timeout, max_records)).items()}

    @abc.abstractmethod
    def assignment(self) -> set[TP]: ...

    @abc.abstractmethod
    def pause(self, tps: Sequence[TP]) -> None: ...

    @abc.abstractmethod
    def resume(self, tps: Sequence[TP]) -> None: ...

    @abc.abstractmethod
    async def seek(self, tp: TP, offset: int) -> None: ...

    @abc.abstractmethod
    async def commit(self, offsets: dict[TP, int], *, wait: bool = True) -> None:
        """Commit ``offsets`` (the next offset to read, Kafka's convention).

        ``wait=False`` allows a client to send the commit without waiting for the answer (the
        periodic checkpoint: a lost commit only means records are processed again).
        """

    @abc.abstractmethod
    async def committed(self, tps: Sequence[TP]) -> dict[TP, int | None]: ...

    @abc.abstractmethod
    async def end_offsets(self, tps: Sequence[TP]) -> dict[TP, int]: ...

    async def beginning_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        """Each partition's log start offset (the first offset still kept)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list beginning offsets")

    @abc.abstractmethod
    async def check_connection(self, timeout: float) -> None:
        """Ask the cluster for metadata; raise if no broker answers within ``timeout`` seconds.
        (Fetches return nothing during an outage on every client: this is how it is told apart
        from a quiet topic.)"""

    def highwater(self, tp: TP) -> int | None:
        """The last high watermark the client saw for ``tp`` (no request); None if unknown."""
        return None

    def fetched_end(self, tp: TP) -> tuple[int | None, bool]:
        """Where the last fetch response said the log of ``tp`` ends for this consumer (no
        request), and whether that is exact: the last stable offset under read_committed, or the
        high watermark when uncommitted records are readable. Not exact: a high watermark that
        may lie past records an open transaction holds back. ``(None, False)`` before a fetch."""
        return None, False

    async def position(self, tp: TP) -> int | None:
        """The offset the next fetch of ``tp`` starts at: past skipped transaction markers,
        unlike the last record's offset + 1."""
        return None

    def group_metadata(self) -> Any:
        """What a transaction needs to commit this member's offsets: the group id, or (where the
        client supports EOS v2) the group's generation and member id, so a zombie is fenced."""
        raise TransactionsUnsupported(f"{type(self).__name__} cannot commit offsets in a transaction")

    def rejoin(self) -> None:
        """Leave the current assignment and join the group again (after being fenced)."""
        raise NotImplementedError

    def take_failed_commits(self) -> set[TP]:
        """Partitions whose ``commit(wait=False)`` the broker refused since the last call (a
        commit racing a rebalance): the checkpoint sends them again. Clients that commit
        synchronously report failures by raising instead."""
        return set()


class Producer(abc.ABC):
    """Sends without waiting per record; ``flush`` is the durability point."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        track: bool = True,
    ) -> asyncio.Future[Any] | None:
        """Queue one record (waiting only while the client's buffer is full).

        With ``track`` the returned future resolves to ``(partition, offset)`` once the broker
        has it; without, a driver may return None and skip the per-record future (sinks,
        repartitioning, changelogs). Either way a failed delivery makes the next flush raise.
        """

    def try_send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None,
                 headers: Headers | None = None, timestamp: int | None = None) -> bool:
        """Queue one untracked record without awaiting, if the client can right now; False means
        the caller must use ``send`` (buffer full, or a client whose sends are coroutines)."""
        return False

    def try_send_many(self, records: Sequence[tuple[str, bytes | None, bytes | None]]) -> int:
        """``try_send`` of each ``(topic, key, value)`` in order until one cannot go: how many
        went (the caller sends the rest with ``send``). A client may do it in a tighter loop."""
        sent = 0
        for topic, key, value in records:
            if not self.try_send(topic, key, value):
                break
            sent += 1
        return sent

    @abc.abstractmethod
    async def flush(self) -> None:
        """Wait until every record sent before this call is acknowledged; raise if any of them
        failed. Records sent while it waits are left to the next flush, so it ends although
        streams keep sending (a checkpoint does not stop them for it)."""

    @abc.abstractmethod
    async def partitions_for(self, topic: str) -> int: ...

    # Transactions: drivers that support them override these (exactly-once checkpoints).

    async def init_transactions(self) -> None:
        """Register the transactional id, fencing any older producer that used it."""
        raise TransactionsUnsupported(f"{type(self).__name__} does not run transactions")

    async def begin_transaction(self) -> None:
        raise TransactionsUnsupported(f"{type(self).__name__} does not run transactions")

    async def send_offsets_to_transaction(self, offsets: dict[TP, int], group: Any) -> None:
        """Commit ``offsets`` for the group if, and only if, the transaction commits; ``group`` is
        the consumer's ``group_metadata()``."""
        raise TransactionsUnsupported(f"{type(self).__name__} does not run transactions")

    async def commit_transaction(self) -> None:
        raise TransactionsUnsupported(f"{type(self).__name__} does not run transactions")

    async def abort_transaction(self) -> None:
        raise TransactionsUnsupported(f"{type(self).__name__} does not run transactions")


class Admin(abc.ABC):
    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics that do not exist yet; existing ones are left alone."""

    @abc.abstractmethod
    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        """Describe ``names`` (all topics when None); missing topics are absent from the result."""

    async def describe_partitions(self, names: Sequence[str]) -> dict[str, list[PartitionInfo]]:
        """Each existing topic's partitions with their leader, replicas and in-sync replicas."""
        return {}

    async def diagnose(self) -> str | None:
        """After a failed connection: the cause and fix if no retry can heal it (bad credentials,
        untrusted certificate, ...; transport/auth_errors.py), else None."""
        return None

    async def delete_topics(self, names: Sequence[str]) -> dict[str, str]:
        """Delete ``names`` (``streamkit reset``); returns the broker's refusal per topic (an
        absent topic is no refusal)."""
        return {name: f"{type(self).__name__} cannot delete topics" for name in names}

    async def topic_configs(self, names: Sequence[str], *, set_only: bool = False) -> dict[str, dict[str, str]]:
        """Each existing topic's configs as the broker reports them (a topic it does not
        describe is absent: nothing can be checked about it); ``set_only``: only those set on
        the topic itself, not the broker's defaults."""
        return {}

    async def delete_records(self, before: dict[TP, int]) -> dict[TP, str]:
        """Delete each partition's records below the given offset (DeleteRecords: the log start
        moves up); returns the broker's refusal per partition (empty when all were deleted)."""
        return {tp: f"{type(self).__name__} cannot delete records" for tp in before}

    async def group_offsets(self, group: str) -> dict[TP, int]:
        """Every offset ``group`` committed (the next offset to read, per partition)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list a group's offsets")

    async def delete_group(self, group: str) -> str | None:
        """Delete a consumer group and its committed offsets (``streamkit reset``); the
        broker's refusal (a group with live members), or None once deleted or absent."""
        return f"{type(self).__name__} cannot delete consumer groups"

    async def set_group_config(self, group: str, values: dict[str, str]) -> dict[str, str]:
        """Set KIP-848 group-level configs (``consumer.session.timeout.ms``...); returns the
        broker's refusal per name (empty when all were set)."""
        return {name: f"{type(self).__name__} cannot set group configs" for name in values}


class Driver(abc.ABC):
    """Builds the three clients from settings."""

    name: str

    @abc.abstractmethod
    def consumer(self, group_id: str | None, *, protocol: GroupProtocol = GroupProtocol.EAGER,
                 **overrides: Any) -> Consumer:
        """``protocol``: how it rebalances as a group member; ``overrides``: native settings."""

    def changelog_reader(self) -> Consumer:
        """A group-less consumer for reading changelogs (table restores, standbys, global
        tables): where a worker's restart time goes, so a driver may read them with a faster client."""
        return self.consumer(None)

    @abc.abstractmethod
    def producer(self, **overrides: Any) -> Producer: ...

    @abc.abstractmethod
    def admin(self) -> Admin: ...
