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

from ..topology import Topology

if TYPE_CHECKING:
    from ..app import App


async def plan_topology(app: "App", table_manager: Callable[..., Any] | None = None) -> Topology:
    """``table_manager``: tables/manager.TableManager (a higher layer), for apps with tables."""
    from .worker import Runtime

    if app.runtime is not None:
        raise RuntimeError("the app is running: its topology is app.runtime.topology")
    conf = app.conf
    with tempfile.TemporaryDirectory(prefix="streamkit-topology-") as data_dir:
        app.conf = dataclasses.replace(conf, driver="memory", broker=f"memory://topology-{uuid.uuid4().hex[:8]}",
                                       web_enabled=False, data_dir=data_dir, broker_connect_timeout=5.0)
        runtime = app.runtime = Runtime(app, table_manager=table_manager)
        runtime.planning = True
        try:
            await runtime.start()
            assert runtime.topology is not None
            return runtime.topology
        finally:
            await runtime.stop()
            app.runtime = None
            app.conf = conf
