"""What ``streamkit send TARGET`` writes to: an agent's input or a topic the app knows.

A name the app does not know is refused before anything connects, with the names it may have
meant: sending to it would create a topic (or let the broker auto-create one) that no agent
reads — a typo that succeeds silently.
"""
from __future__ import annotations

import difflib
from typing import Any

from ..errors import ConfigurationError

LISTED = 10  # names shown when none is close to the target


def send_target(app: Any, target: str) -> Any:
    """The topic ``target`` names: an agent (its input), or a topic of ``app.all_topics()``
    (declared, agents', internal); else a ConfigurationError saying what may be meant."""
    agent = app.agents.get(target)
    if agent is not None:
        return agent.topic
    known = {topic.name: topic for topic in app.all_topics()}
    if target in known:
        return known[target]
    raise ConfigurationError(_refusal(app, target))


def _refusal(app: Any, target: str) -> str:
    topics = sorted(name for name, topic in app.topics.items() if not topic.internal)
    agents = sorted(app.agents)
    close = difflib.get_close_matches(target, topics + agents, n=3)
    if close:
        meant = " or ".join(repr(name) for name in close)
    else:
        meant = "one of its topics (" + _listed(topics) + ")" + (f" or agents ({_listed(agents)})" if agents else "")
    return (f"{target!r} is neither a topic nor an agent of app {app.id!r}; did you mean {meant}? "
            f"To send to a new topic, declare it in the app (app.topic({target!r}, ...)): it is then "
            "created with the app's settings")


def _listed(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:LISTED])
    return shown + (f", ... {len(names) - LISTED} more" if len(names) > LISTED else "")
