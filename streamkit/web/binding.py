"""The web server's listening sockets and TLS context, made before the worker joins its group.

A worker whose port is taken (or whose certificate does not load) must fail before it touches
the consumer group: joining and then leaving rebalances every healthy member twice. The sockets
are bound and listening here; the server serves them once the worker has started.
"""
from __future__ import annotations

import errno
import socket
import ssl
from dataclasses import dataclass, field

from ..errors import ConfigurationError
from ..settings import Settings
from .tls import server_context

BACKLOG = 128  # aiohttp's default


@dataclass
class Listeners:
    """Bound, listening sockets for ``web_host:web_port`` and the TLS context to serve them with."""

    sockets: list[socket.socket] = field(default_factory=list)
    ssl_context: ssl.SSLContext | None = None

    def close(self) -> None:
        """Release the port (the worker did not start, or the server took copies)."""
        for sock in self.sockets:
            sock.close()
        self.sockets = []


def bind_web(conf: Settings) -> Listeners:
    """Bind every address ``web_host`` resolves to, as ``loop.create_server`` would; a taken port
    is a ConfigurationError naming it and what to do instead."""
    context = server_context(conf)  # a certificate that does not load: refused now as well
    host, port = conf.web_host, conf.web_port
    listeners = Listeners(ssl_context=context)
    try:
        infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            listeners.sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError as exc:
        listeners.close()
        raise ConfigurationError(_refusal(host, port, exc)) from None
    return listeners


def _refusal(host: str, port: int, exc: OSError) -> str:
    """One line: why the address cannot be served, and the settings that change it."""
    other = ("give this worker another port (--web-port N, or web_port=) or run it without web views "
             "(--without-web, or web_enabled=False)")
    if exc.errno == errno.EADDRINUSE:
        return f"cannot serve web views on {host}:{port}: the port is taken by another process; {other}"
    reason = exc.strerror or str(exc)
    if isinstance(exc, socket.gaierror):
        return f"cannot serve web views on {host}:{port}: {host!r} does not resolve ({reason}); fix --web-host"
    return f"cannot serve web views on {host}:{port} ({reason}); use another --web-host or --web-port, or --without-web"
