"""An in-process broker with Kafka's semantics, for deterministic tests of the runtime's logic.

Partitions are append-only logs with offsets; consumer groups split partitions among members
(Kafka's range assignor) with revoke-then-assign callbacks; committed offsets survive a
consumer's restart; keys are placed with Java's murmur2. Transactions behave as in Kafka: each
commit or abort writes a control marker (so offsets have gaps), read_committed consumers stop at
the last stable offset and never see aborted records, offsets sent to a transaction are
committed only with it, and a producer re-initialised with the same transactional id fences the
older one (its next call raises ProducerFenced). No network, no threads.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ConfigurationError, GroupFenced, ProducerFenced
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
from .memory_faults import Faults, InjectedFault
from .partitioner import partition_for_key
from .pending import PendingDeliveries

_BROKERS: dict[str, "MemoryBroker"] = {}
# a record as MemoryBroker.append takes it: topic, key, value, partition, headers, timestamp
_Record = tuple[str, bytes | None, bytes | None, int | None, Any, int | None]


class MemoryBroker:
    """Topics, logs, groups and committed offsets of one in-memory cluster."""

    def __init__(self, name: str, auto_create_partitions: int = 1) -> None:
        self.name = name
        self.logs: dict[str, list[list[Message]]] = {}
        self.committed: dict[str, dict[TP, int]] = {}
        self.groups: dict[str, list["MemoryConsumer"]] = {}
        self.auto_create_partitions = auto_create_partitions
        self._waiters: list[asyncio.Future[None]] = []
        self._round_robin = itertools.count()
        self.txn_epochs: dict[str, int] = {}
        self.open_txns: dict[str, "_Txn"] = {}
        self.control: dict[TP, set[int]] = {}  # offsets of commit/abort markers
        self.aborted: dict[TP, set[int]] = {}  # offsets of records whose transaction aborted
        self.generations: dict[str, int] = {}  # consumer group generation, bumped per rebalance
        self.faults = Faults()  # what tests make go wrong (memory_faults.py)
        self.log_start: dict[TP, int] = {}  # raised by delete_records; records below it are gone
        self.topic_configs: dict[str, dict[str, str]] = {}  # as created (create_topics' specs)

    @classmethod
    def named(cls, name: str) -> "MemoryBroker":
        broker = _BROKERS.get(name)
        if broker is None:
            broker = _BROKERS[name] = cls(name)
        return broker

    @classmethod
    def forget(cls, name: str) -> None:
        _BROKERS.pop(name, None)

    def create_topic(self, name: str, partitions: int) -> None:
        if name not in self.logs:
            self.logs[name] = [[] for _ in range(partitions)]

    def append(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
               headers: Any, timestamp: int | None, txn: "_Txn | None" = None) -> tuple[int, int]:
        if topic not in self.logs:
            self.create_topic(topic, self.auto_create_partitions)
        logs = self.logs[topic]
        if partition is None:
            partition = partition_for_key(key, len(logs)) if key is not None else next(self._round_robin) % len(logs)
        if not 0 <= partition < len(logs):
            raise ConfigurationError(f"topic {topic!r} has no partition {partition}")
        log = logs[partition]
        offset = len(log)
        ts = timestamp if timestamp is not None else int(time.time() * 1000)
        log.append(Message(topic, partition, offset, key, value, list(headers or []), ts))
        if txn is not None:
            tp = TP(topic, partition)
            txn.first_offsets.setdefault(tp, offset)
            txn.records.append((tp, offset))
        self._wake()
        return partition, offset

    # -- transactions ---------------------------------------------------------------------------

    def init_producer(self, transactional_id: str) -> int:
        """Bump the id's epoch (fencing older producers) and abort what a zombie left open."""
        epoch = self.txn_epochs.get(transactional_id, -1) + 1
        self.txn_epochs[transactional_id] = epoch
        if transactional_id in self.open_txns:
            self.end_txn(transactional_id, commit=False)
        return epoch

    def fence(self, transactional_id: str) -> None:
        """As if a newer producer registered ``transactional_id``: the current one is fenced."""
        self.init_producer(transactional_id)

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        if self.txn_epochs.get(transactional_id) != epoch:
            raise ProducerFenced(f"producer {transactional_id!r} (epoch {epoch}) was fenced by a newer instance")

    def begin_txn(self, transactional_id: str) -> "_Txn":
        txn = self.open_txns[transactional_id] = _Txn()
        return txn

    def end_txn(self, transactional_id: str, *, commit: bool) -> None:
        txn = self.open_txns.pop(transactional_id)
        touched = {tp for tp, _ in txn.records}
        if not commit:
            for tp, offset in txn.records:
                self.aborted.setdefault(tp, set()).add(offset)
        for tp in touched:  # one control marker per partition, as Kafka writes
            _, marker = self.append(tp.topic, None, None, tp.partition, None, None)
            self.control.setdefault(tp, set()).add(marker)
        if commit:
            for group, offsets in txn.offsets.items():
                self.committed.setdefault(group, {}).update(offsets)
        self._wake()

    def stable_offset(self, tp: TP) -> int:
        """The last stable offset: read_committed consumers read no further."""
        opens = [t.first_offsets[tp] for t in self.open_txns.values() if tp in t.first_offsets]
        return min(opens) if opens else self.end_offset(tp)

    def end_offset(self, tp: TP) -> int:
        return len(self.logs[tp.topic][tp.partition])

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_for_data(self, timeout: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        # asyncio.wait, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
        # races with the future completing, leaving the caller impossible to stop.
        await asyncio.wait({fut}, timeout=timeout)

    async def rebalance(self, group: str) -> None:
        """Hand out partitions again (Kafka's range assignor: contiguous ranges per topic, so
        partition p of equally sized topics lands on one member). Eager: revoke everything from
        every member first. Incremental (every member asked for it, like KIP-848): revoke only
        what moves, then assign only what is new; the rest keeps being read throughout."""
        members = self.groups.get(group, [])
        incremental = bool(members) and all(m.protocol.incremental for m in members)
        if not incremental:
            for member in members:
                await member.group_revoke_all()
        self.generations[group] = self.generations.get(group, 0) + 1
        topics = sorted({t for m in members for t in m.subscribed_topics()})
        shares: dict[int, list[TP]] = {i: [] for i in range(len(members))}
        for topic in topics:
            count = len(self.logs.get(topic, []))
            size, extra = divmod(count, len(members)) if members else (0, 0)
            start = 0
            for i in range(len(members)):
                end = start + size + (1 if i < extra else 0)
                shares[i].extend(TP(topic, p) for p in range(start, end))
                start = end
        if incremental:
            # Every member takes part in the new generation before it gives anything up, as with
            # Kafka's incremental protocols: a member's commits while it revokes (its checkpoint,
            # its commit on revoke) are in that generation and valid. Bumping the group first
            # and the members only at their assignment fenced any commit in between, and the
            # fenced member then gave up everything, not only what moved.
            for member in members:
                member.generation = self.generations[group]
            for i, member in enumerate(members):
                keep = set(shares[i])
                await member.group_revoke_except(keep)
            for i, member in enumerate(members):
                await member.group_assign([tp for tp in shares[i] if tp not in member.assignment()])
            return
        for i, member in enumerate(members):
            await member.group_assign(shares[i])


@dataclass
class _Txn:
    first_offsets: dict[TP, int] = field(default_factory=dict)
    records: list[tuple[TP, int]] = field(default_factory=list)
    offsets: dict[str, dict[TP, int]] = field(default_factory=dict)


class MemoryConsumer(Consumer):
    def __init__(self, broker: MemoryBroker, group_id: str | None, auto_offset_reset: str = "earliest",
                 isolation_level: str = "read_uncommitted", *,
                 protocol: GroupProtocol = GroupProtocol.EAGER) -> None:
        self.broker = broker
        self.protocol = protocol
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.read_committed = isolation_level == "read_committed"
        self._topics: list[str] = []
        self._positions: dict[TP, int] = {}
        self._paused: set[TP] = set()
        self._on_assigned: RebalanceCallback | None = None
        self._on_revoked: RebalanceCallback | None = None
        self._needs_join = False
        self._rejoining = False
        self._failed_commits: set[TP] = set()
        self.generation = 0

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        if self.group_id and self in self.broker.groups.get(self.group_id, []):
            await self.group_revoke_all()
            self.broker.groups[self.group_id].remove(self)
            await self.broker.rebalance(self.group_id)

    def subscribe(self, topics: Sequence[str], on_assigned: RebalanceCallback, on_revoked: RebalanceCallback,
                  on_lost: RebalanceCallback | None = None) -> None:
        """Members of the memory broker's groups have no session to lose: ``on_lost`` is never called."""
        if not self.group_id:
            raise ConfigurationError("subscribe needs a group id")
        self._topics = list(topics)
        self._on_assigned, self._on_revoked = on_assigned, on_revoked
        members = self.broker.groups.setdefault(self.group_id, [])
        if self not in members:
            members.append(self)
        self._needs_join = True

    def subscribed_topics(self) -> list[str]:
        """The topics this member subscribed to: what its group's rebalance assigns from."""
        return list(self._topics)

    async def group_revoke_all(self) -> None:
        """Called by the broker's rebalance (and on stop): give up every partition."""
        await self.group_revoke(list(self._positions))

    async def group_revoke_except(self, keep: set[TP]) -> None:
        """Called by an incremental rebalance: give up what this member holds outside ``keep``."""
        await self.group_revoke([tp for tp in self._positions if tp not in keep])

    async def group_revoke(self, tps: list[TP]) -> None:
        """Called by the broker's rebalance: give up ``tps``, telling the runtime first."""
        if tps and self._on_revoked is not None:
            await self._on_revoked(tps)
        for tp in tps:
            self._positions.pop(tp, None)
            self._paused.discard(tp)

    async def group_assign(self, tps: list[TP]) -> None:
        """Called by the broker's rebalance: take ``tps`` from the group's committed offsets."""
        committed = self.broker.committed.get(self.group_id or "", {})
        for tp in tps:
            start = committed.get(tp)
            if start is None:
                start = 0 if self.auto_offset_reset == "earliest" else self.broker.end_offset(tp)
            self._positions[tp] = start
        self._paused -= set(tps)  # a fresh assignment starts unpaused, as in Kafka
        self.generation = self.broker.generations.get(self.group_id or "", 0)
        if self._on_assigned is not None:
            await self._on_assigned(tps)

    async def assign(self, tps: Sequence[TP], offsets: dict[TP, int] | None = None) -> None:
        offsets = offsets or {}
        for tp in tps:
            self.broker.create_topic(tp.topic, tp.partition + 1)
            start = 0 if self.auto_offset_reset == "earliest" else self.broker.end_offset(tp)
            self._positions[tp] = offsets.get(tp, start)

    async def getmany(self, timeout: float, max_records: int) -> dict[TP, list[Message]]:
        if not self.broker.faults.available:  # like a real client: nothing arrives, no error
            await asyncio.sleep(timeout)
            return {}
        if self._needs_join:
            self._needs_join = False
            if self._rejoining:
                self._rejoining = False
                await self.group_revoke_all()
            await self.broker.rebalance(self.group_id or "")
        out = self._collect(max_records)
        if not out and timeout > 0:
            await self.broker.wait_for_data(timeout)
            out = self._collect(max_records)
        return out

    def _collect(self, max_records: int) -> dict[TP, list[Message]]:
        out: dict[TP, list[Message]] = {}
        budget = max_records
        for tp, pos in self._positions.items():
            if tp in self._paused or budget <= 0:
                continue
            log = self.broker.logs.get(tp.topic, [[]])[tp.partition]
            end = self.broker.stable_offset(tp) if self.read_committed else len(log)
            if pos < end:
                chunk = log[pos : min(end, pos + budget)]
                self._positions[tp] = pos + len(chunk)
                hidden = self.broker.control.get(tp, set())
                if self.read_committed:
                    hidden = hidden | self.broker.aborted.get(tp, set())
                if hidden:
                    chunk = [m for m in chunk if m.offset not in hidden]
                if chunk:
                    out[tp] = chunk
                    budget -= len(chunk)
        return out

    def assignment(self) -> set[TP]:
        return set(self._positions)

    def pause(self, tps: Sequence[TP]) -> None:
        self._paused.update(tps)

    def resume(self, tps: Sequence[TP]) -> None:
        self._paused.difference_update(tps)

    async def seek(self, tp: TP, offset: int) -> None:
        self._positions[tp] = offset

    async def commit(self, offsets: dict[TP, int], *, wait: bool = True) -> None:
        faults = self.broker.faults
        faults.check_available("commit")
        if faults.take("fail_commits"):
            raise InjectedFault("offset commit failed (injected)")
        if not wait and faults.take("lose_async_commits"):
            self._failed_commits.update(offsets)
            return
        self.broker.committed.setdefault(self.group_id or "", {}).update(offsets)

    async def committed(self, tps: Sequence[TP]) -> dict[TP, int | None]:
        self.broker.faults.check_available("committed")
        group = self.broker.committed.get(self.group_id or "", {})
        return {tp: group.get(tp) for tp in tps}

    async def end_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        faults = self.broker.faults
        faults.check_available("end_offsets")
        end = self.broker.stable_offset if self.read_committed else self.broker.end_offset
        return {tp: max(0, end(tp) - faults.end_offsets_short_by) for tp in tps}

    async def beginning_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        self.broker.faults.check_available("list_offsets")
        return {tp: self.broker.log_start.get(tp, 0) for tp in tps}

    def highwater(self, tp: TP) -> int | None:
        return self.broker.end_offset(tp)

    def fetched_end(self, tp: TP) -> tuple[int | None, bool]:
        return (self.broker.stable_offset(tp) if self.read_committed else self.broker.end_offset(tp)), True

    async def position(self, tp: TP) -> int | None:
        return self._positions.get(tp)

    async def check_connection(self, timeout: float) -> None:
        self.broker.faults.check_available("metadata")

    def group_metadata(self) -> Any:
        return (self.group_id or "", self.generation)

    def take_failed_commits(self) -> set[TP]:
        failed, self._failed_commits = self._failed_commits, set()
        return failed

    def rejoin(self) -> None:
        """Like a real client's unsubscribe + subscribe: the member gives up everything it holds
        (whatever the protocol) and joins again."""
        self._needs_join = True
        self._rejoining = True


class MemoryProducer(Producer):
    """Sends resolve at once, unless a fault says otherwise: then they fail, or wait in a buffer
    through an outage, and ``flush`` reports it, as a real client's flush does."""

    def __init__(self, broker: MemoryBroker, transactional_id: str | None = None) -> None:
        self.broker = broker
        self.transactional_id = transactional_id
        self._epoch = -1
        self._txn: _Txn | None = None
        self._pending = PendingDeliveries()
        self._buffer: list[tuple[asyncio.Future[Any], _Record, float, _Txn | None]] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self._drain()

    async def send(self, topic: str, key: bytes | None, value: bytes | None, *, partition: int | None = None,
                   headers: Any = None, timestamp: int | None = None, track: bool = True) -> asyncio.Future[Any]:
        if self.transactional_id is not None:
            self._check()
            if self._txn is None:
                raise RuntimeError("a transactional producer sends only inside a transaction")
        fut = asyncio.get_running_loop().create_future()
        record = (topic, key, value, partition, headers, timestamp)
        faults = self.broker.faults
        if faults.send_fails(topic, value):
            fut.set_exception(InjectedFault(f"delivery to {topic!r} failed (injected)"))
        elif self._buffer or not faults.available:
            self._buffer.append((fut, record, time.monotonic(), self._txn))
        else:
            self._deliver(fut, record, self._txn)
        self._pending.add(fut, topic)
        return fut

    def try_send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None,
                 headers: Any = None, timestamp: int | None = None) -> bool:
        """``send(track=False)`` without a coroutine, as the real clients' hot path (False when a
        test filled the buffer, an outage holds records back, or for a transactional producer)."""
        faults = self.broker.faults
        if faults.buffer_full:
            faults.buffer_full -= 1
            return False
        if self._buffer or not faults.available or self.transactional_id is not None:
            # transactional sends keep the awaited path: the memory broker's generation checks
            # at a revoke's commit are tested against the timing they were written for
            return False
        fut = asyncio.get_running_loop().create_future()
        record = (topic, key, value, partition, headers, timestamp)
        if faults.send_fails(topic, value):
            fut.set_exception(InjectedFault(f"delivery to {topic!r} failed (injected)"))
        else:
            self._deliver(fut, record, self._txn)
        self._pending.add(fut, topic)
        return True

    def _deliver(self, fut: asyncio.Future[Any], record: _Record, txn: "_Txn | None") -> None:
        try:
            fut.set_result(self.broker.append(*record, txn))
        except Exception as exc:  # surfaced at flush like a real delivery failure
            fut.set_exception(exc)

    def _drain(self) -> None:
        """Deliver what an outage held back, in order; fail what waited past the timeout."""
        faults = self.broker.faults
        now = time.monotonic()
        while self._buffer:
            fut, record, sent_at, txn = self._buffer[0]
            if not faults.available and now - sent_at < faults.delivery_timeout:
                return
            self._buffer.pop(0)
            if faults.available:
                self._deliver(fut, record, txn)
            else:
                fut.set_exception(InjectedFault(f"delivery to {record[0]!r} timed out after "
                                                f"{faults.delivery_timeout:.0f}s (injected outage)"))

    async def flush(self) -> None:
        self._drain()
        last = self._buffer[-1][0] if self._buffer else None  # records sent later are the next flush's
        while last is not None and not last.done():  # the outage is waited out, or the records time out
            await asyncio.sleep(0.01)
            self._drain()
        await self._pending.settle()

    def _check(self) -> None:
        if self.transactional_id is None:
            raise RuntimeError("not a transactional producer")
        self.broker.check_epoch(self.transactional_id, self._epoch)

    async def init_transactions(self) -> None:
        if self.transactional_id is None:
            raise RuntimeError("init_transactions needs a transactional_id")
        self.broker.faults.check_available("init_transactions")
        self._epoch = self.broker.init_producer(self.transactional_id)

    async def begin_transaction(self) -> None:
        self._check()
        if self._txn is not None:
            raise RuntimeError("a transaction is already open")
        self._txn = self.broker.begin_txn(self.transactional_id or "")

    async def send_offsets_to_transaction(self, offsets: dict[TP, int], group: Any) -> None:
        self.broker.faults.check_available("send_offsets_to_transaction")
        self._check()
        if self._txn is None:
            raise RuntimeError("no open transaction")
        if isinstance(group, tuple):  # (group id, generation): EOS v2 fencing through the group
            group, generation = group
            if generation != self.broker.generations.get(group, 0):
                raise GroupFenced(f"group {group!r} moved to generation "
                                         f"{self.broker.generations.get(group, 0)} (this member had {generation})")
        self._txn.offsets.setdefault(group, {}).update(offsets)

    async def commit_transaction(self) -> None:
        """Commits even if one of the transaction's sends failed (as aiokafka does): checking
        deliveries before committing is the caller's job, and the tests hold it to that."""
        faults = self.broker.faults
        self._drain()
        faults.check_available("commit_transaction")
        if faults.take("fail_txn_commits"):
            raise InjectedFault("commit_transaction failed (injected)")
        await self._end(commit=True)
        self._pending.discard()

    async def abort_transaction(self) -> None:
        faults = self.broker.faults
        faults.check_available("abort_transaction")
        if faults.take("fail_txn_aborts"):
            raise InjectedFault("abort_transaction failed (injected)")
        for fut, _record, _sent_at, txn in self._buffer:
            if txn is self._txn:  # never sent: the aborted transaction takes them along
                fut.cancel()
        self._buffer = [b for b in self._buffer if b[3] is not self._txn]
        await self._end(commit=False)
        self._pending.discard()

    async def _end(self, *, commit: bool) -> None:
        self._check()
        if self._txn is None:
            raise RuntimeError("no open transaction")
        self._txn = None
        self.broker.end_txn(self.transactional_id or "", commit=commit)

    async def partitions_for(self, topic: str) -> int:
        return len(self.broker.logs[topic])


class MemoryAdmin(Admin):
    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        for spec in specs:
            if spec.name not in self.broker.logs:
                self.broker.topic_configs[spec.name] = dict(spec.config)
            self.broker.create_topic(spec.name, spec.partitions)

    async def topic_configs(self, names: Sequence[str], *, set_only: bool = False) -> dict[str, dict[str, str]]:
        """The memory broker has no defaults: every config is one set at creation."""
        return {name: dict(self.broker.topic_configs.get(name, {})) for name in names if name in self.broker.logs}

    async def delete_topics(self, names: Sequence[str]) -> dict[str, str]:
        for name in names:
            self.broker.logs.pop(name, None)
        return {}

    async def delete_records(self, before: dict[TP, int]) -> dict[TP, str]:
        if self.broker.faults.refuse_delete_records:
            return {tp: "DeleteRecords refused (injected)" for tp in before}
        for tp, offset in before.items():
            end = len(self.broker.logs[tp.topic][tp.partition])
            if offset > end:
                return {tp: f"offset {offset} is past the end ({end})"}
            self.broker.log_start[tp] = max(offset, self.broker.log_start.get(tp, 0))
        return {}

    async def group_offsets(self, group: str) -> dict[TP, int]:
        return dict(self.broker.committed.get(group, {}))

    async def delete_group(self, group: str) -> str | None:
        if self.broker.groups.get(group):
            return f"group {group!r} has live members"
        self.broker.committed.pop(group, None)
        return None

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        return {
            name: TopicInfo(name, len(logs), 1)
            for name, logs in self.broker.logs.items()
            if not names or name in names
        }

    async def describe_partitions(self, names: Sequence[str]) -> dict[str, list[PartitionInfo]]:
        """One broker (id 0) leads every partition of the memory cluster."""
        return {name: [PartitionInfo(p, 0, [0], [0]) for p in range(len(self.broker.logs[name]))]
                for name in names if name in self.broker.logs}


class MemoryDriver(Driver):
    name = "memory"

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.broker = MemoryBroker.named(settings.bootstrap_servers or "default")

    def consumer(self, group_id: str | None, *, protocol: GroupProtocol = GroupProtocol.EAGER,
                 **overrides: Any) -> Consumer:
        return MemoryConsumer(
            self.broker,
            group_id,
            overrides.get("auto_offset_reset", self.settings.auto_offset_reset),
            overrides.get("isolation_level", self.settings.isolation_level),
            protocol=protocol,
        )

    def producer(self, **overrides: Any) -> Producer:
        return MemoryProducer(self.broker, overrides.get("transactional_id"))

    def admin(self) -> Admin:
        return MemoryAdmin(self.broker)
