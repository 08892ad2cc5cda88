"""The Topology a worker freezes at start, and ``streamkit topology``."""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import streamkit as sk
from streamkit.testing import wait_for


class Order(sk.Record):
    id: str
    user: str
    amount: float


def build():
    name = f"topo-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://")
    orders = app.topic("orders", value_type=Order, partitions=3)
    totals_topic = app.topic("totals", partitions=3)
    totals = app.Table("totals", default=float)
    late: list[str] = []

    @app.agent(orders, sink=[totals_topic])
    async def by_user(stream):
        async for order in stream.group_by(Order.user):
            totals[order.user] += order.amount
            yield totals[order.user]

    @app.agent(app.topic("commands", partitions=3))
    async def lazy(stream):
        async for _command in stream:  # declares a group_by only once a record arrives
            try:
                async for _ in stream.group_by(lambda v: v, name="too-late"):
                    break
            except sk.ConfigurationError as exc:
                late.append(str(exc))

    @app.timer(60)
    async def tick():
        pass

    return app, late


async def test_the_frozen_topology_names_sources_repartitions_sinks_and_tables():
    app, _ = build()
    async with app.running():
        topology = app.runtime.topology
    repartition = f"{app.id}-by_user-user-repartition"
    assert topology.copartitioned == ("commands", "orders", repartition)
    [by_user] = [a for a in topology.agents if a.name.endswith("by_user")]
    assert by_user.reads == ("orders", repartition) and by_user.writes == (repartition, "totals")
    [table] = topology.tables
    assert (table.name, table.partitions, table.changelog) == ("totals", 3, f"{app.id}-totals-changelog")
    text = topology.describe()
    assert f"co-partitioned (3 partitions): commands, orders, {repartition}" in text
    assert f"table totals [3] store memory:// changelog {app.id}-totals-changelog" in text
    assert "timer " in text and "tick" in text
    mermaid = topology.mermaid().splitlines()
    [node] = [line.split("(")[0].strip() for line in mermaid if f'(["{repartition}"])' in line]
    agent = [line.split("[")[0].strip() for line in mermaid if '["agent ' in line and "by_user" in line][0]
    assert f"  {node} --> {agent}" in mermaid and f"  {agent} --> {node}" in mermaid


async def test_a_topic_first_read_after_the_freeze_is_refused_with_the_fix():
    app, late = build()
    async with app.running():
        await app.topics["commands"].send(value="go")
        await wait_for(lambda: late, 10, message="the late group_by refused")
        assert "commands" in app.runtime.router.topics() and not any("too-late" in t for t in app.runtime.router.topics())
    assert "after the worker froze its topology" in late[0] and "before the agent's first" in late[0]


async def test_planning_needs_no_broker_and_leaves_the_app_as_it_was():
    app, _ = build()
    before = app.conf
    topology = await app.plan_topology()
    assert app.conf is before and app.runtime is None
    assert any(a.name.endswith("by_user") for a in topology.agents)


def test_the_topology_command_prints_the_example(tmp_path):
    out = subprocess.run([sys.executable, "-m", "streamkit", "topology", "-A", "examples.orders:app"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Topology of app 'orders'") and "orders-aggregate-user-repartition" in out.stdout
    mermaid = subprocess.run([sys.executable, "-m", "streamkit", "topology", "-A", "examples.orders:app",
                              "--format", "mermaid"], capture_output=True, text=True, timeout=60)
    assert mermaid.returncode == 0 and mermaid.stdout.startswith("flowchart LR"), mermaid.stderr
    guide = (Path(__file__).parents[3] / "docs" / "guide.md").read_text()
    assert out.stdout.strip() in guide and mermaid.stdout.strip() in guide, "docs/guide.md shows an outdated topology"
