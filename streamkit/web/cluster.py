"""Who serves which table partition: each worker publishes its web URL and partitions.

Claims go to the single-partition topic ``<app-id>-__cluster``; every worker reads it from the
start (without a group). The newest claim for a table partition wins, so after a rebalance the
new owner's claim replaces the old one as soon as it is read.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import orjson

from ..transport.base import TP, Message
from ..transport.reader import Reader

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger("streamkit.cluster")


class Cluster:
    def __init__(self, app: "App", url: str) -> None:
        self.app = app
        self.url = url
        self.claims: dict[tuple[str, int], str] = {}
        self._reader: Reader | None = None

    @property
    def topic(self) -> Any:
        return self.app.cluster_topic

    async def start(self) -> None:
        consumer = self.app.driver.consumer(None)
        await consumer.start()
        tp = TP(self.topic.name, 0)
        await consumer.assign([tp], {tp: 0})
        self._reader = Reader(consumer, self._on_claims, name="cluster-reader")

    def _on_claims(self, _tp: TP, messages: list[Message]) -> None:
        for m in messages:
            try:
                claim = orjson.loads(m.value)
                for table, numbers in claim["tables"].items():
                    for n in numbers:
                        self.claims[(table, n)] = claim["url"]
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring a malformed cluster claim: %r", exc)

    async def publish(self, tables: dict[str, list[int]]) -> None:
        """Announce the table partitions this worker serves now."""
        value = orjson.dumps({"url": self.url, "tables": tables, "at": time.time()})
        await self.app.send_raw(self.topic.name, self.url.encode(), value, partition=0)
        for table, numbers in tables.items():
            for n in numbers:
                self.claims[(table, n)] = self.url

    def owner(self, table: str, number: int) -> str | None:
        return self.claims.get((table, number))

    async def stop(self) -> None:
        if self._reader is not None:
            reader, self._reader = self._reader, None
            await reader.stop()
