"""Faust's ``app.Table(..., changelog_topic=topic)``: a table whose changelog is a topic the app
declared, so the table's changes are that topic's records (a Faust course template builds its
whole output this way).

Such a topic is the app's *and* its readers': so the table writes no checkpoint marks to it
(readers would see them; tables/marks.py), restores and standbys apply every record of it, as
Faust's do, and ``streamkit reset`` leaves it alone (it deletes internal topics only). It must keep
the latest value per key: created with ``cleanup.policy=compact`` unless declared so; a topic
declared to delete records is refused; an existing one without compaction is warned of.
"""
from __future__ import annotations

import logging
from typing import Any

from ..errors import ConfigurationError

log = logging.getLogger(__name__)

_WARNED: set[str] = set()


def adopt(app: Any, table: str, topic: Any, key_type: Any, value_type: Any,
          partitions: int | None) -> tuple[Any, Any, int | None]:
    """Check that ``topic`` can be table ``table``'s changelog and make it compacted; returns the
    table's key type, value type and partitions, each the topic's when the table gives none."""
    from ..topics import Topic

    if not isinstance(topic, Topic) or len(topic.members) != 1 or getattr(topic, "is_channel", False):
        raise ConfigurationError(f"app.Table({table!r}, changelog_topic={topic!r}): give one topic declared with "
                                 "app.topic(name, ...)")
    if topic.app is not app:
        raise ConfigurationError(f"app.Table({table!r}): changelog_topic {topic.name!r} is a topic of another app; "
                                 f"declare it with this app's app.topic({topic.name!r}, ...)")
    for other in app.tables.values():
        if other.changelog is topic:
            raise ConfigurationError(f"app.Table({table!r}): topic {topic.name!r} is already the changelog of table "
                                     f"{other.name!r}; a changelog holds one table's keys: declare another topic")
    policy = topic.config.get("cleanup.policy")
    if policy is None:
        topic.config["cleanup.policy"] = "compact"  # the latest value per key is what a restore needs
    elif "compact" not in policy.replace(" ", "").split(","):
        raise ConfigurationError(f"app.Table({table!r}): changelog_topic {topic.name!r} is declared with "
                                 f"cleanup.policy={policy}: its records would be deleted by age and the table's state "
                                 "with them; declare it with cleanup.policy=compact (or leave it out)")
    if partitions and topic.partitions and partitions != topic.partitions:
        raise ConfigurationError(f"app.Table({table!r}, partitions={partitions}): its changelog_topic "
                                 f"{topic.name!r} is declared with {topic.partitions} partitions; make them equal")
    types = []
    for what, ours, theirs in (("key_type", key_type, topic.key_type), ("value_type", value_type, topic.value_type)):
        if ours is not None and theirs is not None and ours != theirs:
            raise ConfigurationError(f"app.Table({table!r}, {what}={_name(ours)}): its changelog_topic "
                                     f"{topic.name!r} has {what}={_name(theirs)}; declare one (or the same) type")
        types.append(ours if ours is not None else theirs)
    return types[0], types[1], partitions or topic.partitions


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", repr(tp))


async def warn_if_not_compacted(app: Any) -> None:
    """A warning per declared changelog that exists without compaction (the broker keeps it as
    it is; the command that fixes it is named)."""
    from ..runtime.topic_admin import connect_admin

    where = app.conf.bootstrap_servers
    names = sorted(t.changelog.name for t in app.tables.values()
                   if t.changelog_declared and f"{where}/{t.changelog.name}" not in _WARNED)
    if not names:
        return
    admin = await connect_admin(app.driver, app.conf.bootstrap_servers, app.conf.broker_connect_timeout)
    try:
        configs = await admin.topic_configs(names)
    except Exception as exc:  # a broker that cannot describe configs: nothing to compare
        log.debug("could not describe topic configs: %r", exc)
        return
    finally:
        await admin.stop()
    for name in names:
        have = (configs.get(name) or {}).get("cleanup.policy")
        if have is not None and "compact" not in have.replace(" ", "").split(","):
            _WARNED.add(f"{where}/{name}")  # once per process: the worker checks at every start
            log.warning("topic %r is a table's changelog but has cleanup.policy=%s: the broker deletes its records "
                        "by age, and a restore then misses the keys they held; set cleanup.policy=compact with "
                        "kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s "
                        "--add-config cleanup.policy=compact", name, have, name)
