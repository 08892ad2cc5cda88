"""Who is in the app and what each worker serves: claims on ``<app-id>-__cluster``.

Each worker publishes a claim (its member id, its web URL if any, the table partitions it
serves) after every rebalance and every ``HEARTBEAT`` seconds, and a ``left`` claim when it
stops; every worker reads the single-partition topic from the start, without a group. From
that it knows:

- who serves a table partition (the newest claim naming it): web views forward there;
- which members are alive (a claim within ``3 x HEARTBEAT``, no ``left`` since): standby
  placement. Every worker computes the same answer from the same claims, so each partition has
  at most ``N`` warm copies and they stay put while membership does not change.

Where the standbys go: a warm copy helps only on the worker that takes the partition over when
its owner leaves (Kafka Streams' assignor steers the move to the copy, KIP-441; streamkit's
clients cannot steer theirs). Under range assignment the move is predictable, so the copy goes
there. Range gives each member, in the order of the member ids the group coordinator handed
out, the next contiguous block of partitions; the claims show those blocks, hence the order.
Once an owner leaves, range over the others in that order gives its partition to one of them:
that is the first standby; the second is where it would go if the first left too, and so on.
When the order is not visible (a live member serving none of the table's partitions) or the
protocol is not range, standbys are the
``N`` members ranked highest for the partition by rendezvous hashing
(``crc32(member|table|partition)``).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import orjson

from ..transport.base import TP, Driver, Message
from ..transport.reader import Reader
from .loops import restarting

log = logging.getLogger("streamkit.membership")

TOPIC_CLAIM = "topic:"  # claims keys of assigned topic partitions, beside the tables'
HEARTBEAT = 10.0  # seconds between claims; a member silent for 3 of them is gone


@dataclass
class Member:
    id: str
    url: str | None
    tables: dict[str, list[int]] = field(default_factory=dict)
    at: float = 0.0


def range_taker(number: int, partitions: int, members: int) -> int:
    """Index, among ``members`` sorted members, of the one Kafka's range assignor gives
    partition ``number`` of a ``partitions``-partition topic (the first ``extra`` get one more)."""
    size, extra = divmod(partitions, members)
    wide = extra * (size + 1)
    return number // (size + 1) if number < wide else extra + (number - wide) // size


class Membership:
    def __init__(self, driver: Driver, topic: str, send: Callable[[str, bytes, bytes], Awaitable[Any]], *,
                 url: str | None = None, heartbeat: float = HEARTBEAT, range_failover: bool = False) -> None:
        self.driver = driver
        self.topic = topic
        self.member_id = uuid.uuid4().hex[:12]
        self.url = url
        self.heartbeat = heartbeat
        self.members: dict[str, Member] = {}
        self.claims: dict[tuple[str, int], tuple[float, str | None]] = {}  # (table, n) -> (at, url)
        self.on_change: list[Callable[[], Awaitable[None] | None]] = []
        self._send = send
        self.range_failover = range_failover
        self._serving: dict[str, list[int]] = {}
        self._topics: dict[str, list[int]] = {}
        self._reader: Reader | None = None
        self._beat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        consumer = self.driver.consumer(None)
        await consumer.start()
        tp = TP(self.topic, 0)
        await consumer.assign([tp], {tp: 0})
        self._reader = Reader(consumer, self._on_claims, name="membership reader", supervise=restarting)
        self._beat = restarting("membership heartbeat", self._heartbeat)

    async def stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
            self._beat = None
        try:
            await self._send(self.topic, self.member_id.encode(),
                             orjson.dumps({"member": self.member_id, "left": True, "at": time.time()}))
        except Exception as exc:  # stopping anyway: the others expire this member after 3 heartbeats
            log.info("could not announce leaving: %r", exc)
        if self._reader is not None:
            reader, self._reader = self._reader, None
            await reader.stop()

    # -- publishing -----------------------------------------------------------------------------

    async def publish(self, serving: dict[str, list[int]] | None = None, *,
                      topics: dict[str, list[int]] | None = None) -> None:
        """Announce the table partitions this worker serves now (and, for ``@app.topic_route``,
        the topic partitions it is assigned); what is not given stays as last announced."""
        if serving is not None:
            self._serving = serving
        if topics is not None:
            self._topics = topics
        claim = {"member": self.member_id, "url": self.url, "tables": self._serving, "topics": self._topics,
                 "at": time.time()}
        await self._send(self.topic, self.member_id.encode(), orjson.dumps(claim))
        self._record(claim)  # our own view is current at once

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                await self.publish(self._serving)
            except Exception as exc:
                log.warning("membership heartbeat failed: %r", exc)

    # -- reading --------------------------------------------------------------------------------

    async def _on_claims(self, _tp: TP, messages: list[Message]) -> None:
        changed = False
        for m in messages:
            if m.value is None:
                log.warning("ignoring a cluster claim without a value")
                continue
            try:
                changed |= self._record(orjson.loads(m.value))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring a malformed cluster claim: %r", exc)
        if changed:
            for callback in list(self.on_change):
                result = callback()
                if result is not None:
                    await result

    def _record(self, claim: dict[str, Any]) -> bool:
        """Apply one claim; True if membership or ownership changed."""
        member_id = claim.get("member") or claim["url"]  # claims of older workers carry only a url
        at = float(claim.get("at", 0.0))
        if claim.get("left"):
            return self.members.pop(member_id, None) is not None
        before = self.members.get(member_id)
        tables = {name: list(numbers) for name, numbers in claim["tables"].items()}
        self.members[member_id] = Member(member_id, claim.get("url"), tables, at)
        topics = {TOPIC_CLAIM + name: list(numbers) for name, numbers in claim.get("topics", {}).items()}
        for name, numbers in [*tables.items(), *topics.items()]:
            for n in numbers:
                if at >= self.claims.get((name, n), (0.0, None))[0]:
                    self.claims[(name, n)] = (at, claim.get("url"))
        return before is None or before.tables != tables

    # -- answers --------------------------------------------------------------------------------

    def owner(self, table: str, number: int) -> str | None:
        """URL of the worker that serves ``table`` partition ``number`` (newest claim)."""
        found = self.claims.get((table, number))
        return found[1] if found else None

    def topic_owner(self, topic: str, number: int) -> str | None:
        """URL of the worker assigned partition ``number`` of ``topic`` (newest claim)."""
        return self.owner(TOPIC_CLAIM + topic, number)

    def live(self, now: float | None = None) -> list[Member]:
        now = time.time() if now is None else now
        return [m for m in self.members.values() if now - m.at <= 3 * self.heartbeat]

    def standbys(self, table: str, number: int, count: int, partitions: int = 0) -> list[str]:
        """The ``count`` live members other than the partition's owner that keep a warm copy of
        partition ``number`` of ``table`` (``partitions`` partitions): see the module docstring."""
        live = self.live()
        owners = {m.id for m in live if number in m.tables.get(table, [])}
        ranked = self._range_order(live, table) if self.range_failover and partitions else None
        if ranked is not None:
            return self._failover_order([m for m in ranked if m.id not in owners], number, partitions, count)
        candidates = [m.id for m in live if m.id not in owners]
        candidates.sort(key=lambda mid: zlib.crc32(f"{mid}|{table}|{number}".encode()), reverse=True)
        return candidates[:count]

    @staticmethod
    def _range_order(live: list[Member], table: str) -> list[Member] | None:
        """The members in the order range hands out blocks (the first partition each serves, by
        the newest claims: a crashed member's stale claim counts until it expires), or None
        when the claims do not show it (a live member serving none of the table)."""
        if any(not m.tables.get(table) for m in live):
            return None
        newest: dict[int, Member] = {}
        for m in live:
            for n in m.tables[table]:
                if n not in newest or m.at > newest[n].at:
                    newest[n] = m
        first: dict[str, int] = {}
        for n, m in newest.items():
            first[m.id] = min(first.get(m.id, n), n)
        return sorted((m for m in live if m.id in first), key=lambda m: first[m.id])

    @staticmethod
    def _failover_order(candidates: list[Member], number: int, partitions: int, count: int) -> list[str]:
        """Who range gives partition ``number`` once its owner is gone; then once that one is
        gone too; ``count`` deep. ``candidates`` are in range order."""
        remaining = list(candidates)
        chosen: list[str] = []
        while remaining and len(chosen) < count:
            chosen.append(remaining.pop(range_taker(number, partitions, len(remaining))).id)
        return chosen
