"""Which agents Spark runs, and how: ``check_runnable`` refuses, before the query starts, what a
replayable Spark task cannot reproduce exactly; ``is_keyed`` picks the per-key run
(spark/keyed.py) over the per-partition one (spark/agents.py).

Above agents.py, keyed.py and partitioned.py, whose plans and checks it asks.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from ..errors import SparkUnsupported
from .agents import window_join_of
from .keyed import plan, refuse_table_joins
from .partitioned import check_windows
from .references import referenced

if TYPE_CHECKING:
    from ..agents.agent import Agent


_REFUSED_METHODS = {
    "through": "it forwards through another topic (run the agent of that topic instead)",
    "take": "take() batches by wall-clock time, which a replayed micro-batch cannot reproduce",
}


def _code_names(fun: Any) -> set[str]:
    """Every global and attribute name the function's code (and nested code) mentions."""
    names: set[str] = set()
    stack = [getattr(fun, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if inspect.iscode(c))
    return names


def is_keyed(agent: "Agent") -> bool:
    """An agent that re-keys its stream (``group_by``) or keeps tables: it runs per key, its
    tables' entries in Spark's state (spark/keyed.py)."""
    from ..tables.table import Table
    from ..tables.window_api import WindowWrapper
    if agent.fold is not None or agent.per_record or agent.columnar is not None:
        return False
    if window_join_of(agent) is not None:  # its buffer is partition state (spark/partitioned.py)
        return True
    tables = any(isinstance(v, (Table, WindowWrapper)) for v in referenced(agent.source_fun).values())
    return tables or "group_by" in _code_names(agent.source_fun)


def check_runnable(agent: "Agent") -> None:
    """Raise SparkUnsupported naming the reason when ``agent`` cannot run on Spark."""
    from ..agents.agent import Agent
    from ..app import App
    from ..tables.table import Table
    from ..tables.window_api import WindowWrapper
    from ..topics import Topic

    fun = agent.fold.fun if agent.fold is not None else agent.source_fun
    what = f"agent {agent.name!r} cannot run on Spark"
    if getattr(agent.topic, "is_channel", False):
        raise SparkUnsupported(f"{what}: it reads {agent.topic.name}, an in-process channel; Spark reads topics")
    join = window_join_of(agent)
    if join is None and hasattr(agent.topic, "make_stream"):
        raise SparkUnsupported(f"{what}: it reads {agent.topic.name}, a stream Spark has no source for; "
                               "run this agent on workers")
    if join is None and len(agent.topic.members) > 1:
        raise SparkUnsupported(f"{what}: it reads several topics ({agent.topic.name}); on Spark an agent reads one "
                               "topic: declare one agent per topic")
    keyed = is_keyed(agent)
    keeps_state = keyed if join is None else any(isinstance(v, (Table, WindowWrapper))
                                                 for v in referenced(agent.source_fun).values())
    if agent.fold is None and not agent.per_record and agent.columnar is None and not inspect.isasyncgenfunction(fun) \
            and not keeps_state:
        raise SparkUnsupported(f"{what}: it is a coroutine that keeps no table, so everything it does is a side "
                               "effect; make it an async generator that yields its outputs to sinks")
    if keyed:
        check_windows(agent)
    for sink in agent.sinks:
        if not isinstance(sink, (Topic, Agent)):
            raise SparkUnsupported(f"{what}: sink {sink!r} is a callable (a side effect Spark could repeat); "
                                   "sink to a topic")
    names = _code_names(fun) if agent.columnar is None else set()  # a columnar body's take() is Arrow's
    for method, reason in _REFUSED_METHODS.items():
        if method in names:
            raise SparkUnsupported(f"{what}: it calls {method}(); {reason}")
    if agent.fold is not None:
        refuse_table_joins(agent, [agent.fold.table], "is a fold")
    for name, value in referenced(fun).items():
        if isinstance(value, WindowWrapper) and agent.fold is not None:
            raise SparkUnsupported(f"{what}: a fold keeps its own table; use windowed table {value.name!r} ({name}) "
                                   "from an async agent")
        if isinstance(value, Table) and value.is_global and not _looked_up(agent, value):
            raise SparkUnsupported(f"{what}: it uses global table {value.name!r} ({name}); every worker holds "
                                   "all of it, which no Spark task does: run this agent on workers")
        if isinstance(value, (Topic, Agent, App)):
            raise SparkUnsupported(f"{what}: it uses {name} ({value!r}) to send or ask directly, a side effect "
                                   "Spark could repeat; yield outputs to the agent's sinks instead")


def _looked_up(agent: "Agent", table: Any) -> bool:
    """True when the agent joins GlobalTable ``table`` (``stream.join(table, on=...)``), which
    Spark runs by the looked-up key (spark/lookups.py)."""
    if agent.fold is not None or agent.per_record or agent.columnar is not None:
        return False
    lookup = plan(agent).lookup
    return lookup is not None and lookup[0] is table
