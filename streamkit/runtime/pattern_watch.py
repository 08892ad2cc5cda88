"""Matching topics created while the worker runs: said out loud, not read silently later.

A pattern topic's members are settled at start (topic_patterns.py: the topology, the tables'
co-partitioning and exactly-once's transactions build on that list), so a matching topic created
while the worker runs is read from the next start only. Kafka's own pattern subscriptions pick
one up at the next metadata refresh, which is what a Faust user expects; so every
``CHECK_INTERVAL`` this lists the broker's topics and, once per new topic, logs a warning naming
it, the pattern, the agent and what to do (a rolling restart). ``unread`` holds them (tests,
diagnostics).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

from ..transport.base import Driver
from .loops import AdminLoop

log = logging.getLogger("streamkit.topics")

CHECK_INTERVAL = 60.0  # seconds between two listings of the broker's topics


class PatternWatch(AdminLoop):
    """Lists the broker's topics now and then; warns of matching topics this worker does not read."""

    name = "pattern watch"

    def __init__(self, driver: Driver, bootstrap: str, connect_timeout: float, patterns: list[tuple[str, Any]],
                 own: Callable[[list[str]], Iterable[str]], interval: float | None = None) -> None:
        super().__init__()
        self.driver, self.bootstrap, self.connect_timeout = driver, bootstrap, connect_timeout
        self.patterns = patterns  # (agent name, its pattern topic: .pattern, .members, .matching())
        self.own = own  # the app's own topics among a listing (never matched)
        self.interval = CHECK_INTERVAL if interval is None else interval
        self.unread: dict[str, str] = {}  # topic -> the agent whose pattern it matches
        self.listings = 0

    def wanted(self) -> bool:
        return bool(self.patterns) and self.interval > 0

    async def _run(self) -> None:
        from .topic_admin import connect_admin

        while True:
            await asyncio.sleep(self.interval)
            admin = await self.admin(lambda: connect_admin(self.driver, self.bootstrap, self.connect_timeout))
            self.check(list(await admin.describe_topics()))

    def check(self, names: list[str]) -> None:
        self.listings += 1
        own = set(self.own(names))
        for agent, topic in self.patterns:
            read = {member.name for member in topic.members}
            for name in topic.matching(names, own):
                if name not in read and name not in self.unread:
                    self.unread[name] = agent
                    log.warning("topic %r was created after the worker started and matches pattern %r of agent %s: "
                                "this worker does not read it (what a pattern matches is settled at start); "
                                "restart the workers (a rolling restart) to read it", name, topic.pattern.pattern,
                                agent)
