"""Keeping a broker outage from becoming a log flood and a busy loop.

aiokafka retries a refused connection as fast as its callers ask (no reconnect backoff setting)
and logs every attempt: ~300,000 "Unable connect to node" lines in 40 s per worker, a CPU
spent on nothing. ``with_reconnect_backoff`` makes its client wait, per node, an exponentially
growing and jittered delay after a failed connection (librdkafka's ``reconnect.backoff.ms`` /
``reconnect.backoff.max.ms`` model); ``RateLimitFilter`` lets one line per message template
through every ``every`` seconds, with a count of what it held back. The worker's own broker
watch (runtime/broker_watch.py) is what reports an outage.
"""
from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from typing import Any

RECONNECT_BACKOFF = 0.1  # seconds after the first failed connection to a node
RECONNECT_BACKOFF_MAX = 2.0  # ceiling: how late at most a worker notices the broker is back

_NOISY_LOGGERS = ("aiokafka", "aiokafka.client", "aiokafka.conn", "aiokafka.consumer.fetcher",
                  "aiokafka.consumer.group_coordinator", "aiokafka.producer.sender",
                  "aiokafka.producer.producer", "aiokafka.consumer.consumer")


class RateLimitFilter(logging.Filter):
    """One record per (logger, message template) every ``every`` seconds, from ``level`` up; with
    ``by_text`` the template is the message with its numbers blanked (librdkafka's lines are
    preformatted: ``... (after 3ms in state APIVERSION_QUERY)``)."""

    def __init__(self, every: float = 30.0, level: int = logging.WARNING, by_text: bool = False) -> None:
        super().__init__()
        self.every = every
        self.level = level
        self.by_text = by_text
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            return True
        key = (record.name, re.sub(r"\d+", "#", record.getMessage()) if self.by_text else str(record.msg))
        now = time.monotonic()
        last, held = self._seen.get(key, (0.0, 0))
        if last and now - last < self.every:
            self._seen[key] = (last, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} [{held} similar message(s) in the last {now - last:.0f}s not shown]"
        return True


_installed = False


def quiet_client_logs() -> None:
    """Rate-limit the Kafka clients' per-attempt warnings (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    limiter = RateLimitFilter()
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).addFilter(limiter)


def with_reconnect_backoff(client: Any) -> Any:
    """Give an aiokafka ``AIOKafkaClient`` a per-node reconnect backoff (see module docstring)."""
    base = type(client)
    if getattr(base, "_streamkit_backoff", False):
        return client
    client.__class__ = _backoff_class(base)
    client._sk_backoff = {}  # noqa: SLF001 - our attribute on the client we subclass
    return client


_classes: dict[type, type] = {}


def _backoff_class(base: Any) -> type:
    """``base``: aiokafka's client class (aiokafka ships no type hints)."""
    cls = _classes.get(base)
    if cls is not None:
        return cls

    async def _get_conn(self: Any, node_id: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        until, delay = self._sk_backoff.get(node_id, (0.0, 0.0))
        if until > loop.time():
            await asyncio.sleep(until - loop.time())
        conn = await base._get_conn(self, node_id, *args, **kwargs)  # noqa: SLF001 - the aiokafka method this subclass wraps
        if conn is None:
            delay = min(max(delay * 2, RECONNECT_BACKOFF), RECONNECT_BACKOFF_MAX)
            self._sk_backoff[node_id] = (loop.time() + delay * random.uniform(0.8, 1.2), delay)
        else:
            self._sk_backoff.pop(node_id, None)
        return conn

    cls = _classes[base] = type(f"Backoff{base.__name__}", (base,), {"_get_conn": _get_conn,
                                                                      "_streamkit_backoff": True})
    return cls
