"""An in-process broker with Kafka's semantics, for deterministic tests of the runtime's logic.

Partitions are append-only logs with offsets; consumer groups split partitions among members
(range-like, sorted round-robin) with revoke-then-assign callbacks; committed offsets survive a
consumer's restart; keys are placed with Java's murmur2. No network, no threads.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Sequence

from ..errors import ConfigurationError
from .base import TP, Admin, Consumer, Driver, Message, Producer, RebalanceCallback, TopicInfo, TopicSpec
from .partitioner import partition_for_key

_BROKERS: dict[str, "MemoryBroker"] = {}


class MemoryBroker:
    """Topics, logs, groups and committed offsets of one in-memory cluster."""

    def __init__(self, name: str, auto_create_partitions: int = 1) -> None:
        self.name = name
        self.logs: dict[str, list[list[Message]]] = {}
        self.committed: dict[str, dict[TP, int]] = {}
        self.groups: dict[str, list["MemoryConsumer"]] = {}
        self.auto_create_partitions = auto_create_partitions
        self._waiters: list[asyncio.Future] = []
        self._round_robin = itertools.count()

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
               headers: Any, timestamp: int | None) -> tuple[int, int]:
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
        self._wake()
        return partition, offset

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
        """Revoke everything from every member, then hand out partitions again."""
        members = self.groups.get(group, [])
        for member in members:
            await member._revoke_all()
        topics = sorted({t for m in members for t in m._topics})
        tps = [TP(t, p) for t in topics for p in range(len(self.logs.get(t, [])))]
        shares: dict[int, list[TP]] = {i: [] for i in range(len(members))}
        for i, tp in enumerate(tps):
            shares[i % len(members)].append(tp)
        for i, member in enumerate(members):
            await member._assign_group(shares[i])


class MemoryConsumer(Consumer):
    def __init__(self, broker: MemoryBroker, group_id: str | None, auto_offset_reset: str = "earliest") -> None:
        self.broker = broker
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self._topics: list[str] = []
        self._positions: dict[TP, int] = {}
        self._paused: set[TP] = set()
        self._on_assigned: RebalanceCallback | None = None
        self._on_revoked: RebalanceCallback | None = None
        self._needs_join = False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        if self.group_id and self in self.broker.groups.get(self.group_id, []):
            await self._revoke_all()
            self.broker.groups[self.group_id].remove(self)
            await self.broker.rebalance(self.group_id)

    def subscribe(self, topics: Sequence[str], on_assigned: RebalanceCallback, on_revoked: RebalanceCallback) -> None:
        if not self.group_id:
            raise ConfigurationError("subscribe needs a group id")
        self._topics = list(topics)
        self._on_assigned, self._on_revoked = on_assigned, on_revoked
        members = self.broker.groups.setdefault(self.group_id, [])
        if self not in members:
            members.append(self)
        self._needs_join = True

    async def _revoke_all(self) -> None:
        if self._positions and self._on_revoked is not None:
            await self._on_revoked(list(self._positions))
        self._positions = {}

    async def _assign_group(self, tps: list[TP]) -> None:
        committed = self.broker.committed.get(self.group_id or "", {})
        for tp in tps:
            start = committed.get(tp)
            if start is None:
                start = 0 if self.auto_offset_reset == "earliest" else self.broker.end_offset(tp)
            self._positions[tp] = start
        self._paused &= set(tps)
        if self._on_assigned is not None:
            await self._on_assigned(tps)

    async def assign(self, tps: Sequence[TP], offsets: dict[TP, int] | None = None) -> None:
        offsets = offsets or {}
        for tp in tps:
            self.broker.create_topic(tp.topic, tp.partition + 1)
            start = 0 if self.auto_offset_reset == "earliest" else self.broker.end_offset(tp)
            self._positions[tp] = offsets.get(tp, start)

    async def getmany(self, timeout: float, max_records: int) -> dict[TP, list[Message]]:
        if self._needs_join:
            self._needs_join = False
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
            if pos < len(log):
                chunk = log[pos : pos + budget]
                out[tp] = chunk
                self._positions[tp] = pos + len(chunk)
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

    async def seek_to_end(self, tps: Sequence[TP]) -> None:
        for tp in tps:
            self._positions[tp] = self.broker.end_offset(tp)

    async def commit(self, offsets: dict[TP, int], *, wait: bool = True) -> None:
        self.broker.committed.setdefault(self.group_id or "", {}).update(offsets)

    async def committed(self, tps: Sequence[TP]) -> dict[TP, int | None]:
        group = self.broker.committed.get(self.group_id or "", {})
        return {tp: group.get(tp) for tp in tps}

    async def end_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        return {tp: self.broker.end_offset(tp) for tp in tps}

    def highwater(self, tp: TP) -> int | None:
        return self.broker.end_offset(tp)


class MemoryProducer(Producer):
    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send(self, topic: str, key: bytes | None, value: bytes | None, *, partition: int | None = None,
                   headers: Any = None, timestamp: int | None = None) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        try:
            fut.set_result(self.broker.append(topic, key, value, partition, headers, timestamp))
        except Exception as exc:  # surfaced at flush like a real delivery failure
            fut.set_exception(exc)
        return fut

    async def flush(self) -> None:
        pass

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
            self.broker.create_topic(spec.name, spec.partitions)

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        return {
            name: TopicInfo(name, len(logs), 1)
            for name, logs in self.broker.logs.items()
            if not names or name in names
        }


class MemoryDriver(Driver):
    name = "memory"

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.broker = MemoryBroker.named(settings.bootstrap_servers or "default")

    def consumer(self, group_id: str | None, **overrides: Any) -> Consumer:
        return MemoryConsumer(self.broker, group_id, overrides.get("auto_offset_reset", self.settings.auto_offset_reset))

    def producer(self, **overrides: Any) -> Producer:
        return MemoryProducer(self.broker)

    def admin(self) -> Admin:
        return MemoryAdmin(self.broker)
