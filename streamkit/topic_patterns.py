"""``app.topic(pattern=...)``: an agent input over every topic whose whole name matches.

The worker settles what it reads once, at start (the topology, the co-partitioning of tables
with their sources, exactly-once's transactions all build on that list), so the matching topics
are the ones on the broker then: each start lists the broker's topics and logs the match. A
matching topic created while the worker runs is read from the next start (a rolling restart)
on, not before. Kafka's own pattern subscriptions pick one up at the next metadata refresh;
streamkit does not, because its tables and checks would not know of it, and says so instead: a
warning per new matching topic (runtime/pattern_watch.py).

Never matched: names starting with ``__`` (Kafka's internal topics) and the app's own topics
(changelogs, leader, replies, cluster, dead letters, repartition topics). A pattern matching
nothing at start is refused: the agent would read nothing until a restart.
"""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .errors import ConfigurationError
from .topics import Topic, TopicGroup

if TYPE_CHECKING:
    from .types.app import AppProtocol

log = logging.getLogger("streamkit.topics")


class PatternTopic(TopicGroup):
    """The topics matching ``pattern`` (``re.fullmatch``, as Kafka's Java client matches),
    found when the worker starts. Read only: sending needs one topic."""

    def __init__(self, app: "AppProtocol", pattern: "re.Pattern[str]", make: Callable[[str], Topic]) -> None:
        template = make(f"pattern:{pattern.pattern}")  # the codecs the members get
        app.topics.pop(template.name, None)  # not a topic to create
        Topic.__init__(self, app, template.name, key_type=template.key_type, value_type=template.value_type)
        self.key_codec, self.value_codec = template.key_codec, template.value_codec
        self.pattern = pattern
        self._make = make
        self._members: tuple[Topic, ...] = ()
        self.resolved = False

    def __repr__(self) -> str:
        return f"<PatternTopic {self.pattern.pattern!r} matched={[m.name for m in self._members]}>"

    def _refuse(self) -> TypeError:
        return TypeError(f"{self!r} stands for the topics matching a pattern: send to one of them "
                         "(app.topic('<name>'))")

    def matching(self, names: Iterable[str], own: set[str]) -> list[str]:
        return sorted(n for n in names if self.pattern.fullmatch(n) and not n.startswith("__") and n not in own)

    def resolve(self, names: list[str]) -> None:
        self._members = tuple(self._make(n) for n in names)
        self.resolved = True


def pattern_topic(app: "AppProtocol", name: str, pattern: Any, make: Callable[[str], Topic], *, partitions: Any,
                  replicas: Any, config: Any) -> PatternTopic:
    """Faust's ``app.topic(pattern=...)``, checked: what it cannot be is refused here."""
    if name:
        raise ConfigurationError(f"app.topic({name!r}, pattern={pattern!r}): give both a name and a pattern? "
                                 "Faust refuses that too: one or the other")
    if partitions is not None or replicas is not None or config:
        raise ConfigurationError(f"app.topic(pattern={pattern!r}, partitions=/replicas=/config=): the topics a "
                                 "pattern matches are not created by the worker, only read; create them with "
                                 "their settings (streamkit topics create, or app.topic(name, partitions=...))")
    try:
        compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise ConfigurationError(f"app.topic(pattern={pattern!r}): not a valid regular expression ({exc})") from None
    return PatternTopic(app, compiled, make)


async def resolve_patterns(app: "AppProtocol", *, planning: bool) -> None:
    """Give every agent's pattern topic the topics matching it on the broker now (see module doc)."""
    patterns = [(agent.name, agent.topic) for agent in app.agents.values() if isinstance(agent.topic, PatternTopic)]
    if not patterns:
        return
    from .runtime.topic_admin import connect_admin

    conf = app.conf
    admin = await connect_admin(app.driver, conf.bootstrap_servers, conf.broker_connect_timeout)
    try:
        names = list(await admin.describe_topics())
    finally:
        await admin.stop()
    own = set(app.derived_topics(names)) | {app.dlq_topic_name}
    for agent, topic in patterns:
        matched = topic.matching(names, own)
        if not matched and not planning:
            raise ConfigurationError(f"agent {agent}: no topic on the broker matches pattern {topic.pattern.pattern!r} "
                                     "(the whole name must match); the matching topics are found when the worker "
                                     "starts: create one first, then start the worker")
        topic.resolve(matched)
        if not planning:
            log.info("agent %s reads the topics matching %r at start: %s (a matching topic created later is "
                     "read from the next start)", agent, topic.pattern.pattern, ", ".join(matched))
