"""The topic of an agent declared without one: Faust's name, so a Faust deployment's records
reach it.

Faust names such an agent ``<module>.<function>`` (mode's ``canonshortname``; a script run as
``python app.py`` is named by its path, not ``__main__``) and gives it the topic
``<app id>-<that name>``, or ``<app id>-<name>`` for ``@app.agent(name=...)``. streamkit used
``<app id>-<function>``: ``warn_of_old_agent_topics`` tells a worker's operator when that old
topic still holds records.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)


def faust_agent_name(fun: Callable[..., Any]) -> str:
    """``<module>.<function>``, the module of ``__main__`` resolved from the script's path as
    Faust resolves it (innermost package first, as mode's ``_detect_main_name`` does)."""
    module = fun.__module__
    if module == "__main__":
        module = _main_module_name()
    return f"{module}.{fun.__name__}"


def _main_module_name() -> str:
    filename = getattr(sys.modules.get("__main__"), "__file__", None)
    if not filename:  # a REPL
        return "__main__"
    path = Path(filename).absolute()
    packages = []
    node = path.parent
    while (node / "__init__.py").exists() and node != node.parent:
        packages.append(node.stem)
        node = node.parent
    return ".".join([*packages, path.stem])


def default_topic_name(app_id: str, fun: Callable[..., Any], name: str | None) -> str:
    """The topic of ``@app.agent()`` without a channel, as Faust names it."""
    return f"{app_id}-{name or faust_agent_name(fun)}"


def old_default_topic_names(app: Any) -> dict[str, str]:
    """``{old topic: new topic}`` of the agents whose default topic streamkit named
    ``<app id>-<function>`` before it took Faust's name."""
    moved = {}
    for agent in app.agents.values():
        if getattr(agent, "default_topic", False):
            old = f"{app.id}-{agent.name}"
            if old != agent.topic.name and old not in app.topics:
                moved[old] = agent.topic.name
    return moved


async def warn_of_old_agent_topics(app: Any) -> None:
    """A warning per old-style agent topic that exists on the broker and was written to: the agent
    reads the new topic, so those records (and whatever still writes there) are not read."""
    from ..runtime.topic_admin import connect_admin
    from ..transport.base import TP

    moved = old_default_topic_names(app)
    if not moved:
        return
    admin = await connect_admin(app.driver, app.conf.bootstrap_servers, app.conf.broker_connect_timeout)
    try:
        existing = await admin.describe_topics(sorted(moved))
    finally:
        await admin.stop()
    for old in sorted(n for n in moved if n in existing):
        if not await _holds_records(app, [TP(old, p) for p in range(existing[old].partitions)]):
            continue
        log.warning("topic %r holds records for an agent that now reads %r (streamkit names an agent's own topic as "
                    "Faust does, <app id>-<module>.<function>): to go on reading the old topic, give it to the agent, "
                    "@app.agent(app.topic(%r, ...)); else let the senders switch (streamkit send and agent.send do) "
                    "and drain it", old, moved[old], old)


async def _holds_records(app: Any, tps: list[Any]) -> bool:
    """Whether any of ``tps`` was ever written to (an end offset above 0)."""
    consumer = app.driver.consumer(None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return any(ends.get(tp, 0) > 0 for tp in tps)
