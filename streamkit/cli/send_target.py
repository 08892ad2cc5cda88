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
    """The topic ``target`` names: ``@agent`` (Faust's form: the agent's input, by its name or
    Faust's ``module.function`` name), a topic of ``app.all_topics()`` (declared, agents',
    internal), or an agent by its bare name; else a ConfigurationError saying what may be meant."""
    if target.startswith("@"):
        agent = _agent(app, target[1:])
        if agent is None:
            raise ConfigurationError(_agent_refusal(app, target))
        return agent.topic
    known = {topic.name: topic for topic in app.all_topics()}
    if target in known:  # as in Faust, a bare name is a topic first
        return known[target]
    agent = app.agents.get(target)
    if agent is not None:
        return agent.topic
    raise ConfigurationError(_refusal(app, target))


def _agent(app: Any, name: str) -> Any:
    from ..agents.naming import faust_agent_name

    if name in app.agents:
        return app.agents[name]
    for agent in app.agents.values():
        if faust_agent_name(agent.source_fun) == name:
            return agent
    return None


def _agent_refusal(app: Any, target: str) -> str:
    agents = ["@" + name for name in sorted(app.agents)]
    close = difflib.get_close_matches(target, agents, n=3)
    meant = " or ".join(repr(name) for name in close) if close else f"one of its agents ({_listed(agents)})"
    return f"{target!r} is not an agent of app {app.id!r}; did you mean {meant}? (send TOPIC VALUE sends to a topic)"


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
