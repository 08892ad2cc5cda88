"""Why aiokafka could not connect: one raw connection to the first bootstrap server, to see
the error aiokafka hides behind "Unable to bootstrap" (auth_errors.py explains it).

Apart from auth_errors.py because it builds the client's options (security.py), which itself
explains TLS file errors through auth_errors.py.
"""
from __future__ import annotations

import asyncio
import ssl
from typing import Any

from ..settings import Settings
from .auth_errors import OAUTH_REJECTED, _accepts_tcp, _closed_at_first_request, _first_server, explain, oauth_token_fault
from .security import aiokafka_common


async def aiokafka_diagnose(settings: Settings, timeout: float = 5.0) -> str | None:
    """One raw aiokafka connection to the first bootstrap server, to see the error it hides."""
    from aiokafka.conn import create_conn
    from aiokafka.errors import KafkaConnectionError

    token_fault = await asyncio.to_thread(oauth_token_fault, settings)
    if token_fault:
        return token_fault
    host, port = _first_server(settings)
    opts: dict[str, Any] = dict(aiokafka_common(settings))
    opts.pop("bootstrap_servers", None)
    try:
        conn = await asyncio.wait_for(create_conn(host, port, **opts), timeout)
    except ConnectionResetError:
        if "SSL" in settings.effective_security_protocol and await _accepts_tcp(host, port):
            return (f"the broker accepts connections but closed the TLS handshake: check security_protocol "
                    f"(now {settings.effective_security_protocol}) against the broker's listener (a PLAINTEXT or "
                    "SASL_PLAINTEXT listener does not speak TLS)")
        return None
    except KafkaConnectionError:  # closed during the first request: the reason is only in aiokafka's debug log
        return await _closed_at_first_request(settings, host, port, opts.get("ssl_context"), timeout)
    except (asyncio.TimeoutError, ConnectionError):
        return None  # unreachable, not misconfigured
    except ssl.SSLError as exc:
        return explain(f"{exc}", settings) or f"TLS failed: {exc}"
    except Exception as exc:
        return explain(f"{type(exc).__name__}: {exc}", settings)
    try:
        if settings.sasl_mechanism == "OAUTHBEARER":
            # aiokafka takes the broker's error challenge ({"status":"invalid_token"}) for success;
            # the broker then refuses the first request (an error answer listing no broker) and closes
            from aiokafka.protocol.metadata import MetadataRequest

            try:
                answer = await asyncio.wait_for(conn.send(MetadataRequest([])), timeout)
            except (KafkaConnectionError, ConnectionError):
                return OAUTH_REJECTED
            except asyncio.TimeoutError:
                return None
            if not getattr(answer, "brokers", None):
                return OAUTH_REJECTED
    finally:
        conn.close()
    return None
