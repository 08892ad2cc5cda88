"""Connection failures that no retry heals: bad credentials, a mechanism the broker does not
enable, an untrusted certificate, a client certificate the broker requires.

Both clients hide them behind a generic "cannot connect": aiokafka logs the SASL error and
raises "Unable to bootstrap", librdkafka logs it and times out. ``explain`` turns the client's
own words into the cause and the setting to fix, so startup fails at once with that line
instead of retrying for ``broker_connect_timeout`` and reporting a network problem.
librdkafka's log goes through Python logging (``streamkit.librdkafka``), rate limited, so
``-l`` governs it and a failure can be read back (``LIBRDKAFKA_FAILURES``).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import re
import ssl
from typing import Any

from ..settings import Settings
from .quiet import RateLimitFilter

librdkafka_log = logging.getLogger("streamkit.librdkafka")
LIBRDKAFKA_FAILURES: collections.deque[str] = collections.deque(maxlen=20)  # newest failure lines


class _RecordFailures(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            LIBRDKAFKA_FAILURES.append(record.getMessage())


librdkafka_log.addHandler(_RecordFailures())
librdkafka_log.addFilter(RateLimitFilter())  # a refused connection is retried (and logged) every few ms


_REFUSALS = (("topic", "topic"), ("group", "group"), ("transactional_?id", "transactional id"),
             ("cluster", "cluster"))


def refused_access(text: str, settings: Settings, group: str | None = None) -> str | None:
    """An authorization failure (a missing ACL), named with its resource where the client says it
    (aiokafka ``TopicAuthorizationFailedError: orders``; librdkafka ``TOPIC_AUTHORIZATION_FAILED``
    does not name it: ``group`` names the consumer group the caller knows)."""
    compact = re.sub(r"[\s_]", "", text.lower())
    for pattern, kind in _REFUSALS:
        if re.search(f"{pattern.replace('_?', '')}authorizationfailed", compact):
            named = re.search(r"AuthorizationFailed\w*(?::\s+|\(')([\w.\-]+)", text)
            name = named.group(1) if named else (group if kind == "group" else None)
            what = f"{kind} {name!r}" if name and kind != "cluster" else f"a {kind}"
            principal = f"User:{settings.sasl_username}" if settings.sasl_username else "this client"
            return (f"the broker refused {principal} access to {what} (no ACL allows it): grant the ACLs "
                    "`streamkit acls -A <module:app>` prints")
    return None


def explain(text: str, settings: Settings) -> str | None:
    """The cause and the fix, if ``text`` (a client's error) is one no retry heals."""
    who = f"user {settings.sasl_username!r}, mechanism {settings.sasl_mechanism or '-'}"
    lowered = text.lower()
    refused = refused_access(text, settings)
    if refused:
        return refused
    if "unsupported sasl mechanism" in lowered or "unsupportedsaslmechanism" in lowered:
        enabled = re.search(r"supported mechanisms: ([A-Z0-9_, -]+)", text)
        also = f" (it enables {enabled.group(1).strip()})" if enabled else ""
        return (f"the broker does not enable sasl_mechanism={settings.sasl_mechanism!r}{also}: set "
                "sasl_mechanism to one it enables")
    if "authentication failed" in lowered or "sasl authentication error" in lowered \
            or "saslauthenticationfailed" in lowered:
        return (f"SASL authentication failed ({who}): check sasl_username and sasl_password "
                "(or sasl_password_file), and that the user exists on the broker")
    if "certificate verify failed" in lowered or "certificate_verify_failed" in lowered:
        return ("the broker's TLS certificate is not trusted: set ssl_cafile to the CA that signed it "
                f"(now {settings.ssl_cafile or 'the system CAs'})")
    if "key_values_mismatch" in lowered or "key values mismatch" in lowered:
        return (f"ssl_keyfile={settings.ssl_keyfile!r} is not the key of ssl_certfile={settings.ssl_certfile!r}: "
                "give the pair that belongs together")
    if ("ssl.key.location failed" in lowered or "bad decrypt" in lowered or "pem lib" in lowered
            or ("pem" in lowered and "password" in lowered)):
        if settings.ssl_password:
            return (f"ssl_password does not decrypt ssl_keyfile={settings.ssl_keyfile!r}: check ssl_password "
                    "(or ssl_password_file) and that the key is PEM")
        return (f"the client key ssl_keyfile={settings.ssl_keyfile!r} could not be read: if it is encrypted, "
                "set ssl_password (or ssl_password_file) to its password")
    for native, setting in (("ssl.certificate.location failed", "ssl_certfile"), ("ssl.ca.location failed",
                                                                                  "ssl_cafile/ssl_capath")):
        if native in lowered:
            return f"{setting} could not be read by librdkafka: check the file is PEM and readable ({text.strip()[:160]})"
    if ("certificate required" in lowered or "alert_certificate_required" in lowered
            or ("handshake failure" in lowered and not settings.ssl_certfile)):
        return "the broker requires a client certificate: set ssl_certfile and ssl_keyfile"
    if "ssl handshake failed" in lowered or "wrong version number" in lowered:
        return (f"the TLS handshake failed ({text.strip()[:160]}): check security_protocol "
                f"(now {settings.effective_security_protocol}) against the broker's listener")
    return None


async def aiokafka_diagnose(settings: Settings, timeout: float = 5.0) -> str | None:
    """One raw aiokafka connection to the first bootstrap server, to see the error it hides."""
    from aiokafka.conn import create_conn

    from .security import aiokafka_common

    host, _, port = settings.bootstrap_servers.split(",")[0].rpartition(":")
    opts: dict[str, Any] = dict(aiokafka_common(settings))
    opts.pop("bootstrap_servers", None)
    try:
        conn = await asyncio.wait_for(create_conn(host.strip("[]"), int(port), **opts), timeout)
    except ConnectionResetError:
        if "SSL" in settings.effective_security_protocol and await _accepts_tcp(host.strip("[]"), int(port)):
            return (f"the broker accepts connections but closed the TLS handshake: check security_protocol "
                    f"(now {settings.effective_security_protocol}) against the broker's listener (a PLAINTEXT or "
                    "SASL_PLAINTEXT listener does not speak TLS)")
        return None
    except (asyncio.TimeoutError, ConnectionError):
        return None  # unreachable, not misconfigured
    except ssl.SSLError as exc:
        return explain(f"{exc}", settings) or f"TLS failed: {exc}"
    except Exception as exc:
        return explain(f"{type(exc).__name__}: {exc}", settings)
    conn.close()
    return None


async def _accepts_tcp(host: str, port: int) -> bool:
    """Whether a plain TCP connection opens: the broker is there, only the protocol is wrong."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


def confluent_diagnose(settings: Settings) -> str | None:
    for line in reversed(LIBRDKAFKA_FAILURES):
        found = explain(line, settings)
        if found:
            return found
    return None
