"""The broker's host names, resolved before a client connects.

A mistyped host name is not a broker that is down: no retry heals it, so it is one line at
once (a ConfigurationError naming the host) instead of the connect timeout's wait. A name the
resolver cannot answer for now (no DNS server reachable) is left to the clients' retries.
"""
from __future__ import annotations

import asyncio
import logging
import socket

from ..errors import ConfigurationError

log = logging.getLogger("streamkit.topics")

# the resolver's "this name does not exist" answers (EAI_AGAIN, a resolver not answering, is not one)
_NO_SUCH_NAME = {
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA", "EAI_ADDRFAMILY") if hasattr(socket, name)
}
_CHECKED_DRIVERS = ("aiokafka", "confluent")  # the memory driver's "address" is a broker's name
RESOLVE_TIMEOUT = 5.0


def hosts_of(address: str) -> list[tuple[str, str]]:
    """``host:port[,host:port]`` (settings.bootstrap_servers) as (host, port) pairs; IPv6
    literals lose their brackets."""
    pairs = []
    for part in address.split(","):
        host, _, port = part.strip().rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if host:
            pairs.append((host, port))
    return pairs


async def _missing(host: str, port: str) -> str | None:
    """Why ``host`` does not exist, or None (it resolves, or the resolver could not say)."""
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.getaddrinfo(host, port or None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT)
    except socket.gaierror as exc:
        return (exc.strerror or str(exc)) if exc.errno in _NO_SUCH_NAME else None
    except (asyncio.TimeoutError, OSError, UnicodeError):
        return None
    return None


async def check_host_names(driver_name: str, address: str) -> None:
    """Raise ConfigurationError when no bootstrap host name exists; warn of those that do not
    when another one does (the clients reach the cluster through it)."""
    if driver_name not in _CHECKED_DRIVERS:
        return
    pairs = hosts_of(address)
    reasons = await asyncio.gather(*(_missing(host, port) for host, port in pairs))
    missing = [(host, reason) for (host, _), reason in zip(pairs, reasons, strict=True) if reason is not None]
    if not missing:
        return
    said = "; ".join(f"{host!r}: {reason}" for host, reason in missing)
    if len(missing) == len(pairs):
        raise ConfigurationError(
            f"cannot resolve the Kafka broker host name in {address} ({said}): check the "
            "broker address (broker=, STREAMKIT_BROKER or --broker)"
        )
    log.warning("some Kafka broker host names in %s do not resolve (%s): check the broker address", address, said)
