"""The topology of an app without a broker: its worker started for a moment on the memory driver.

Agents declare group_by/through topics only when their bodies run, so the topology is what a
worker freezes at start; this starts one on a private in-memory broker (no web, no timers,
tables in a temporary directory), takes its frozen Topology and stops. Partition counts are
as declared (or ``topic_partitions``): on a real broker an existing topic's count wins. An agent
that fails before its first record leaves the topology unknown: AgentFailed names it.
"""
from __future__ import annotations

import dataclasses
import tempfile
import uuid
from typing import TYPE_CHECKING, Any, Callable

from ..settings import DriverName
from ..topology import Topology

if TYPE_CHECKING:
    from ..types.app import AppProtocol


async def plan_topology(app: "AppProtocol", table_manager: Callable[..., Any] | None = None) -> Topology:
    """``table_manager``: tables/manager.TableManager (a higher layer), for apps with tables."""
    from .worker import Runtime

    if app.runtime is not None:
        raise RuntimeError("the app is running: its topology is app.runtime.topology")
    conf = app.conf
    with tempfile.TemporaryDirectory(prefix="streamkit-topology-") as data_dir:
        app.conf = dataclasses.replace(conf, driver=DriverName.MEMORY, broker=f"memory://topology-{uuid.uuid4().hex[:8]}",
                                       web_enabled=False, data_dir=data_dir, broker_connect_timeout=5.0)
        runtime = app.runtime = Runtime(app, table_manager=table_manager)
        runtime.planning = True
        app.processing.bind(runtime)
        try:
            await runtime.start()
            assert runtime.topology is not None
            return runtime.topology
        finally:
            try:
                await runtime.stop()
            finally:
                app.processing.unbind(runtime)
                app.runtime = None
            app.conf = conf


async def table_partitions(app: "AppProtocol",
                           table_manager: Callable[..., Any] | None = None) -> dict[str, int | list[str]]:
    """Each table's partition count as a worker settles it (``streamkit tables``): the count, or
    the source topics whose count on the broker decides it (declared without ``partitions=``,
    they take the broker's count if they exist, which only the worker at start can know)."""
    def undecided(names: Any) -> list[str]:
        known = {t.name: t for t in app.all_topics()}
        return sorted(n for n in app.copartition_group(names) if n in known and known[n].partitions is None)

    sources = undecided(m.name for a in app.agents.values() if not getattr(a.topic, "is_channel", False)
                        for m in a.topic.members)
    patterns = [f"the topics matching {pattern.pattern!r}" for pattern in (getattr(a.topic, "pattern", None)
                for a in app.agents.values()) if pattern is not None]  # app.topic(pattern=...): found at start
    sources += patterns
    if not sources:  # every source declared: the worker's own settling (and its refusals), on the memory driver
        topology = await plan_topology(app, table_manager)
        sources = undecided(topology.copartitioned)  # a through topic named in an agent's body
    return {t.name: sources if sources and t.declared_partitions is None and not t.is_global else t.partitions
            for t in app.tables.values()}


def partitions_text(count: int | list[str], topic_partitions: int) -> str:
    """A ``table_partitions`` value as ``streamkit tables`` prints it."""
    if isinstance(count, int):
        return str(count)
    matched = [c for c in count if c.startswith("the topics matching ")]
    if matched:  # a pattern's topics are read, never created: their count on the broker decides
        named = [c for c in count if c not in matched]
        return f"decided at start from {', '.join([*named, *matched])} (their count on the broker)"
    many = len(count) > 1
    return (f"decided at start from topic{'s' if many else ''} {', '.join(count)} ({'their' if many else 'its'} "
            f"count on the broker; {topic_partitions} if the worker creates {'them' if many else 'it'})")
