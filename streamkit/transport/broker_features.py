"""What the broker can do, asked once at worker start (ApiVersions), not guessed from its version.

The worker picks its rebalance protocol from it: the KIP-848 consumer group protocol needs the
broker's ConsumerGroupHeartbeat API (Apache Kafka 4.x has it; the dev broker does not).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..settings import Settings

log = logging.getLogger("streamkit.transport")

CONSUMER_GROUP_HEARTBEAT = 68  # KIP-848's API key


async def api_versions(settings: Settings, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """``api key -> (min, max)`` from the first bootstrap server; empty when it cannot be asked."""
    from aiokafka.conn import create_conn
    from aiokafka.protocol.admin import ApiVersionRequest

    from .security import aiokafka_common

    host, _, port = settings.bootstrap_servers.split(",")[0].rpartition(":")
    opts: dict[str, Any] = dict(aiokafka_common(settings))
    opts.pop("bootstrap_servers", None)
    try:
        conn = await asyncio.wait_for(create_conn(host.strip("[]"), int(port), **opts), timeout)
    except Exception as exc:
        log.warning("could not ask the broker which APIs it supports (%r): assuming the classic ones", exc)
        return {}
    try:
        response = await asyncio.wait_for(conn.send(ApiVersionRequest()), timeout)
        return {key: (low, high) for key, low, high in response.api_versions}
    except Exception as exc:
        log.warning("the broker's ApiVersions answer could not be read (%r): assuming the classic APIs", exc)
        return {}
    finally:
        conn.close()


async def supports_consumer_group_protocol(settings: Settings) -> bool:
    """True if the broker speaks KIP-848 (``group.protocol=consumer``)."""
    return CONSUMER_GROUP_HEARTBEAT in await api_versions(settings)
