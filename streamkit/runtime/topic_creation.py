"""Topics an app sends to exist with the app's settings before the first record goes out.

The worker creates (or checks) every topic it knows of when it starts. A topic first sent to
later — ``app.topic("x").send(...)`` in an agent body, ``app.send("x", ...)`` from a script, a
reply to another app's reply topic — would otherwise be auto-created by the broker on the
producer's metadata request, with the broker's default partition count instead of the topic's
declared partitions or ``topic_partitions``. librdkafka's producer is told not to auto-create
(``allow.auto.create.topics=false``); aiokafka's cannot be, so the creation here, before the
first send, is what keeps it from happening.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Iterable

from ..transport.base import TopicSpec

if TYPE_CHECKING:
    from ..types.app import AppProtocol

log = logging.getLogger("streamkit.topics")


class TopicsOnFirstSend:
    """The names known to exist on the broker, and the creation of any other on its first send."""

    def __init__(self, app: "AppProtocol") -> None:
        self.app = app
        self.known: set[str] = set()  # read inline by the send paths: a set lookup, nothing more
        self._locks: dict[str, asyncio.Lock] = {}

    def exist(self, names: Iterable[str]) -> None:
        """These topics were created or checked (the worker's start, ``topic.declare()``)."""
        self.known.update(names)

    async def ensure(self, name: str) -> None:
        """Create ``name`` if the broker lacks it: with its declaration's partitions, replicas and
        configs when the app declares it, else ``topic_partitions``/``topic_replicas``. Concurrent
        first sends wait for one creation; a failed one raises to each sender and is tried again
        by the next send."""
        if name in self.known:
            return
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name in self.known:
                return
            await self._create(name)
            self.known.add(name)
        self._locks.pop(name, None)

    async def _create(self, name: str) -> None:
        from .topic_admin import ensure_topics

        app, conf = self.app, self.app.conf
        declared = app.topics.get(name)
        if declared is not None:
            spec = declared.spec(conf.topic_partitions, conf.topic_replicas)
        else:
            spec = TopicSpec(name, conf.topic_partitions, conf.topic_replicas)
        want = declared.partitions if declared is not None else None
        described = await ensure_topics(app.driver, conf.bootstrap_servers, [spec], {name: want},
                                        conf.broker_connect_timeout)
        info = described.get(name)
        if info is not None and app.runtime is not None:
            app.runtime.partition_counts.setdefault(name, info.partitions)
