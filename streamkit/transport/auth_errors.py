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
import struct
import time
from typing import Any

from ..settings import Settings
from .quiet import RateLimitFilter

librdkafka_log = logging.getLogger("streamkit.librdkafka")
LIBRDKAFKA_FAILURES: collections.deque[str] = collections.deque(maxlen=20)  # newest failure lines


class _RecordFailures(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            LIBRDKAFKA_FAILURES.append(record.getMessage())


class _CappedAtError:
    """librdkafka's ``logger``: its lines into ``librdkafka_log``, CRITICAL ones (TXNERR, FATAL)
    at ERROR. streamkit decides what ends a worker and says so itself, in one line; librdkafka's
    own CRITICAL lines repeated it, and ``-l critical`` could not silence them."""

    def log(self, level: int, msg: str, *args: Any) -> None:
        librdkafka_log.log(min(level, logging.ERROR), msg, *args)


librdkafka_logger = _CappedAtError()  # the ``logger`` config of every confluent client
librdkafka_log.addHandler(_RecordFailures())
# a refused connection is retried (and logged, at INFO too) every few ms
librdkafka_log.addFilter(RateLimitFilter(level=logging.INFO, by_text=True))


_REFUSALS = (("topic", "topic"), ("group", "group"), ("transactional_?id", "transactional id"),
             ("cluster", "cluster"))


# Java's broker answers a missing client certificate (TLS 1.3) with alert 42, an untrusted one with 46
_BAD_CERTIFICATE = re.compile(r"alert[ _]bad[ _]certificate|bad_certificate|alert[ _]certificate[ _]unknown"
                              r"|certificate_unknown")
OAUTH_REJECTED = ("the broker rejected the OAUTHBEARER token sasl_oauth_token returned (invalid, expired, or not "
                  "what the broker's validator expects): check the function and the broker's OAUTHBEARER settings")
SPEAKS_TLS = ("the broker's listener speaks TLS but security_protocol is {protocol}: set security_protocol to "
              "{wanted} (and ssl_cafile, unless a system CA signed the broker's certificate)")


def refused_access(text: str, settings: Settings, group: str | None = None) -> str | None:
    """An authorization failure (a missing ACL), named with its resource where the client says it
    (aiokafka ``TopicAuthorizationFailedError: orders``; librdkafka ``TOPIC_AUTHORIZATION_FAILED``
    does not name it: ``group`` names the consumer group the caller knows)."""
    compact = re.sub(r"[\s_]", "", text.lower())
    for pattern, kind in _REFUSALS:
        if re.search(f"{pattern.replace('_?', '')}authorizationfailed", compact):
            named = (re.search(r"AuthorizationFailed\w*(?::\s+|\()\{?'?([\w.\-]+)", text)
                     or re.search(r'add partition "([\w.\-]+)"', text))  # librdkafka's ADDPARTS line
            name = named.group(1) if named else (group if kind == "group" else None)
            what = f"{kind} {name!r}" if name and kind != "cluster" else f"a {kind}"
            principal = f"User:{settings.sasl_username}" if settings.sasl_username else "this client"
            return (f"the broker refused {principal} access to {what} (no ACL allows it): grant the ACLs "
                    "`streamkit acls -A <module:app>` prints")
    return None


def refusal_in(exc: BaseException, settings: Settings, group: str | None = None) -> str | None:
    """``refused_access`` for an exception, its causes, and every failed delivery it carries
    (a checkpoint's ``DeliveryFailed``): a missing Write ACL surfaces inside those."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        refused = refused_access(f"{type(current).__name__}: {current} {current!r}", settings, group)
        if refused is not None:
            return refused
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += [e for e in getattr(current, "failures", ()) if isinstance(e, BaseException)]
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
        if settings.sasl_mechanism == "OAUTHBEARER":
            return OAUTH_REJECTED
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
            or ("handshake failure" in lowered and not settings.ssl_certfile)
            or (_BAD_CERTIFICATE.search(lowered) and not settings.ssl_certfile)):
        return "the broker requires a client certificate: set ssl_certfile and ssl_keyfile"
    if _BAD_CERTIFICATE.search(lowered) or "unknown ca" in lowered or "unknown_ca" in lowered:
        return (f"the broker refused the client certificate ssl_certfile={settings.ssl_certfile!r}: it must be "
                "signed by a CA in the broker's truststore, and current")
    if "ssl handshake failed" in lowered or "wrong version number" in lowered:
        return (f"the TLS handshake failed ({text.strip()[:160]}): check security_protocol "
                f"(now {settings.effective_security_protocol}) against the broker's listener")
    return None


def _first_server(settings: Settings) -> tuple[str, int]:
    host, _, port = settings.bootstrap_servers.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


async def _closed_at_first_request(settings: Settings, host: str, port: int, context: ssl.SSLContext | None,
                                   timeout: float) -> str | None:
    """Why the broker closed a connection at its first request: a TLS alert (a client certificate
    missing or refused), or a TLS listener spoken to in plaintext."""
    if context is not None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), timeout)
            try:
                writer.write(_API_VERSIONS_V0)
                await writer.drain()
                await asyncio.wait_for(reader.read(4), timeout)
            finally:
                writer.close()
        except ssl.SSLError as exc:
            return explain(f"{exc}", settings)
        except (OSError, asyncio.TimeoutError):
            return None
        return None
    return await speaks_tls_fault(settings, host, port)


# an ApiVersions v0 request (api key 18, correlation id 1, client id "sk"), size-prefixed
_API_VERSIONS_V0 = struct.pack(">ihhih2s", 12, 18, 0, 1, 2, b"sk")


async def speaks_tls_fault(settings: Settings, host: str | None = None, port: int | None = None) -> str | None:
    """When security_protocol has no TLS: whether the listener completes a TLS handshake (then it
    wants SSL/SASL_SSL; unverified: only to tell the protocols apart, nothing is sent)."""
    protocol = settings.effective_security_protocol
    if "SSL" in protocol:
        return None
    if host is None or port is None:
        host, port = _first_server(settings)
    probe = ssl.create_default_context()
    probe.check_hostname, probe.verify_mode = False, ssl.CERT_NONE
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=probe), 3.0)
    except (OSError, ssl.SSLError, asyncio.TimeoutError):
        return None
    writer.close()
    return SPEAKS_TLS.format(protocol=protocol, wanted="SASL_SSL" if settings.sasl_mechanism else "SSL")


def oauth_token_fault(settings: Settings) -> str | None:
    """Whether ``sasl_oauth_token`` fails, or returns something no broker accepts (not a
    ``(token, expiry)`` pair, or expired): librdkafka would wait 10 s for a token and say only
    "OAuth token not set", aiokafka would send it and retry."""
    function = settings.sasl_oauth_token
    if settings.sasl_mechanism != "OAUTHBEARER" or function is None:
        return None
    name = getattr(function, "__qualname__", repr(function))
    try:
        value = function()
    except Exception as exc:
        return f"sasl_oauth_token ({name}) failed: {type(exc).__name__}: {str(exc)[:200]}"
    if (not isinstance(value, tuple) or len(value) < 2 or not isinstance(value[0], str) or not value[0]
            or isinstance(value[1], bool) or not isinstance(value[1], (int, float))):
        return f"sasl_oauth_token ({name}) must return (token, expiry as epoch seconds), not a {type(value).__name__}"
    if value[1] <= time.time():
        return (f"sasl_oauth_token ({name}) returned a token that expired {time.time() - value[1]:.0f} s ago "
                "(expiry is epoch seconds)")
    return None


async def _accepts_tcp(host: str, port: int) -> bool:
    """Whether a plain TCP connection opens: the broker is there, only the protocol is wrong."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def confluent_diagnose(settings: Settings) -> str | None:
    token_fault = await asyncio.to_thread(oauth_token_fault, settings)
    if token_fault:
        return token_fault
    for line in reversed(LIBRDKAFKA_FAILURES):
        found = explain(line, settings)
        if found:
            return found
    return await speaks_tls_fault(settings)  # librdkafka says only "Disconnected", and at INFO
