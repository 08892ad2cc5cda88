"""``group_by``'s key and the agent's stream under a filter/map: shared by the worker's
repartitioning (agent.py), a test context's (in_process.py) and Spark's (spark/keyed.py).
"""
from __future__ import annotations

import operator
from typing import Any, Callable

from ..streams.stream import Chainable, Stream


def group_key(key: Any, name: str | None) -> tuple[str, Callable[[Any], Any]]:
    """``group_by``'s key: a field name, a Record field or a function (then ``name`` is needed);
    the name the repartition topic takes, and the function giving a value's new key."""
    if isinstance(key, str):
        return key, operator.attrgetter(key)
    if hasattr(key, "__get__") and hasattr(key, "__name__") and not callable(key):
        return key.__name__, operator.attrgetter(key.__name__)  # Record.field
    if callable(key):
        if name is None:
            raise ValueError("group_by with a function needs name=")
        return name, key
    raise TypeError(f"group_by key must be a field or a function, not {key!r}")


def stream_of(source: Chainable) -> Stream:
    """The agent's stream under ``source`` (itself, or the one a filter/map started from)."""
    stream = source if isinstance(source, Stream) else getattr(source, "source", None)
    assert isinstance(stream, Stream)
    return stream
