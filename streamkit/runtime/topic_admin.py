"""Startup checks against the broker: reachable (bounded retry), topics present and consistent."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Collection, Sequence

from ..errors import BrokerUnavailable, ConfigurationError, TopicMismatch
from ..transport.base import Admin, Driver, TopicInfo, TopicSpec
from .host_names import check_host_names

log = logging.getLogger("streamkit.topics")


def _unhealable(driver: Driver, error: BaseException) -> str | None:
    """The cause and the fix when the client's own error is one no retry heals (librdkafka
    refusing its TLS files when the client is created, for one)."""
    from ..transport.auth_errors import explain

    settings = getattr(driver, "settings", None)
    return explain(f"{type(error).__name__}: {error}", settings) if settings is not None else None


def _reason(driver: Driver, error: BaseException | None) -> str:
    """What the last attempt said; librdkafka's timeouts say nothing (``TimeoutError: ``), its own
    log line does (``Connect to ipv4#... failed: Connection refused``)."""
    said = f"{type(error).__name__}: {error}"
    if str(error) or getattr(driver, "name", "") != "confluent":
        return said
    from ..transport.auth_errors import LIBRDKAFKA_FAILURES

    return f"{said}{LIBRDKAFKA_FAILURES[-1]}" if LIBRDKAFKA_FAILURES else f"{said}no answer from the broker"


async def connect_admin(driver: Driver, address: str, timeout: float) -> Admin:
    """An started admin client whose first metadata call succeeded, or BrokerUnavailable (or a
    ConfigurationError at once when no retry can heal it: a host name that does not exist)."""
    await check_host_names(getattr(driver, "name", ""), address)
    deadline = time.monotonic() + timeout
    attempt, last_error = 0, None
    while True:
        attempt += 1
        admin = driver.admin()
        # short first attempts: a misconfiguration is diagnosed within seconds, not at the deadline
        budget = min(max(1.0, deadline - time.monotonic()), 2.0 + 2.0 * attempt)
        try:
            await asyncio.wait_for(admin.start(), budget)
            await asyncio.wait_for(admin.describe_topics(), budget)
            return admin
        except Exception as exc:  # every client has its own connection error types
            last_error = exc
            try:
                cause = await admin.diagnose() or _unhealable(driver, exc)
            except Exception:
                cause = None
            try:
                await admin.stop()
            except Exception:
                pass
            if cause is not None:  # no retry heals it: say so now, not as a network problem later
                raise ConfigurationError(f"cannot connect to the Kafka broker at {address}: {cause}") from exc
        if time.monotonic() >= deadline:
            raise BrokerUnavailable(
                f"cannot reach the Kafka broker at {address} after {attempt} attempts "
                f"in {timeout:.0f}s ({_reason(driver, last_error)})"
            )
        await asyncio.sleep(min(1.0 * attempt, 3.0))


# configs whose absence on an existing topic can lose records, with why streamkit sets them
GUARDED_CONFIGS = {"retention.ms": "a record older than that (by its timestamp) is deleted whether it was read or "
                                   "not; streamkit's repartition topics keep records until it purges them processed"}

_WARNED: set[tuple[str, str, str]] = set()


async def warn_of_config_drift(admin: Admin, specs: Sequence[TopicSpec]) -> None:
    """An internal topic created by an older streamkit (or by hand) without a config this one
    creates it with, where that config protects records: a warning with the command that fixes
    it (the topic is not altered behind the operator's back)."""
    guarded = [s for s in specs if any(name in GUARDED_CONFIGS for name in s.config)]
    if not guarded:
        return
    try:
        configs = await admin.topic_configs([s.name for s in guarded])
    except Exception as exc:  # a broker that cannot describe configs: nothing to compare
        log.debug("could not describe topic configs: %r", exc)
        return
    for spec in guarded:
        actual = configs.get(spec.name)
        if actual is None:
            continue
        for name, want in spec.config.items():
            have = actual.get(name)
            if name in GUARDED_CONFIGS and have is not None and have != want and (spec.name, name, have) not in _WARNED:
                _WARNED.add((spec.name, name, have))  # the worker checks its topics more than once per start
                log.warning("topic %r has %s=%s but is declared with %s (%s): set it with "
                            "kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name "
                            "%s --add-config %s=%s", spec.name, name, have, want, GUARDED_CONFIGS[name], spec.name,
                            name, want)


async def ensure_topics(driver: Driver, address: str, specs: Sequence[TopicSpec], declared: dict[str, int | None],
                        timeout: float, resettable: Collection[str] = ()) -> dict[str, TopicInfo]:
    """Create missing topics; an existing topic whose partition count differs from its
    declaration is a startup error naming both counts (and, for the ``resettable`` topics
    ``streamkit reset`` deletes, that command)."""
    admin = await connect_admin(driver, address, timeout)
    try:
        existing = await admin.describe_topics([s.name for s in specs])
        for spec in specs:
            info = existing.get(spec.name)
            want = declared.get(spec.name)
            if info is not None and want is not None and info.partitions != want:
                reset = (" (it is internal to the app: if the broker lost the app's topics, as a restarted dev "
                         "broker does, `streamkit reset -A <module:app>` deletes it with the other internal topics "
                         "and the local table state, and the next start creates them anew)"
                         if spec.name in resettable else "")
                raise TopicMismatch(
                    f"topic {spec.name!r} exists with {info.partitions} partitions but is declared "
                    f"with {want}; change the declaration or recreate the topic{reset}"
                )
        await warn_of_config_drift(admin, [s for s in specs if s.name in existing and s.config])
        missing = [s for s in specs if s.name not in existing]
        if missing:
            log.info("creating topics: %s", ", ".join(f"{s.name}({s.partitions})" for s in missing))
            try:
                await admin.create_topics(missing)
            except Exception as exc:
                cause = _unhealable(driver, exc)
                if cause is None:
                    raise
                raise ConfigurationError(f"cannot create {', '.join(s.name for s in missing)}: {cause}") from None
            for _ in range(50):  # metadata propagates asynchronously on real clusters
                existing = await admin.describe_topics([s.name for s in specs])
                if all(s.name in existing for s in specs):
                    break
                await asyncio.sleep(0.1)
        return existing
    finally:
        await admin.stop()
