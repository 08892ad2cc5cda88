"""Who is in the app and what each worker serves: claims on ``<app-id>-__cluster``.

Each worker publishes a claim (its member id, its web URL if any, the table partitions it
serves) after every rebalance and every ``HEARTBEAT`` seconds, and a ``left`` claim when it
stops; every worker reads the single-partition topic from the start, without a group. From
that it knows:

- who serves a table partition (the newest claim naming it): web views forward there;
- which members are alive (a claim within ``3 x HEARTBEAT``, no ``left`` since): standby
  placement. A table partition's standbys are the ``N`` live members, other than its owner,
  ranked highest for it by rendezvous hashing (``crc32(member|table|partition)``); every worker
  computes the same answer from the same claims, so each partition has at most ``N`` warm
  copies and they stay put while membership does not change.
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

log = logging.getLogger("streamkit.membership")

HEARTBEAT = 10.0  # seconds between claims; a member silent for 3 of them is gone


@dataclass
class Member:
    id: str
    url: str | None
    tables: dict[str, list[int]] = field(default_factory=dict)
    at: float = 0.0


class Membership:
    def __init__(self, driver: Driver, topic: str, send: Callable[[str, bytes, bytes], Awaitable[Any]], *,
                 url: str | None = None, heartbeat: float = HEARTBEAT) -> None:
        self.driver = driver
        self.topic = topic
        self.member_id = uuid.uuid4().hex[:12]
        self.url = url
        self.heartbeat = heartbeat
        self.members: dict[str, Member] = {}
        self.claims: dict[tuple[str, int], tuple[float, str | None]] = {}  # (table, n) -> (at, url)
        self.on_change: list[Callable[[], Awaitable[None] | None]] = []
        self._send = send
        self._serving: dict[str, list[int]] = {}
        self._reader: Reader | None = None
        self._beat: asyncio.Task | None = None

    async def start(self) -> None:
        consumer = self.driver.consumer(None)
        await consumer.start()
        tp = TP(self.topic, 0)
        await consumer.assign([tp], {tp: 0})
        self._reader = Reader(consumer, self._on_claims, name="membership-reader")
        self._beat = asyncio.create_task(self._heartbeat(), name="streamkit-membership-heartbeat")

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

    async def publish(self, serving: dict[str, list[int]]) -> None:
        """Announce the table partitions this worker serves now."""
        self._serving = serving
        claim = {"member": self.member_id, "url": self.url, "tables": serving, "at": time.time()}
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
            try:
                changed |= self._record(orjson.loads(m.value))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring a malformed cluster claim: %r", exc)
        if changed:
            for callback in list(self.on_change):
                result = callback()
                if result is not None:
                    await result

    def _record(self, claim: dict) -> bool:
        """Apply one claim; True if membership or ownership changed."""
        member_id = claim.get("member") or claim["url"]  # claims of older workers carry only a url
        at = float(claim.get("at", 0.0))
        if claim.get("left"):
            return self.members.pop(member_id, None) is not None
        before = self.members.get(member_id)
        tables = {name: list(numbers) for name, numbers in claim["tables"].items()}
        self.members[member_id] = Member(member_id, claim.get("url"), tables, at)
        for name, numbers in tables.items():
            for n in numbers:
                if at >= self.claims.get((name, n), (0.0, None))[0]:
                    self.claims[(name, n)] = (at, claim.get("url"))
        return before is None or before.tables != tables

    # -- answers --------------------------------------------------------------------------------

    def owner(self, table: str, number: int) -> str | None:
        """URL of the worker that serves ``table`` partition ``number`` (newest claim)."""
        found = self.claims.get((table, number))
        return found[1] if found else None

    def live(self, now: float | None = None) -> list[Member]:
        now = time.time() if now is None else now
        return [m for m in self.members.values() if now - m.at <= 3 * self.heartbeat]

    def standbys(self, table: str, number: int, count: int) -> list[str]:
        """The ``count`` live members other than the partition's owner that keep a warm copy."""
        live = self.live()
        owners = {m.id for m in live if number in m.tables.get(table, [])}
        candidates = [m.id for m in live if m.id not in owners]
        candidates.sort(key=lambda mid: zlib.crc32(f"{mid}|{table}|{number}".encode()), reverse=True)
        return candidates[:count]
