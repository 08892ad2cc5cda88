"""Translate the shared SSL/SASL/compression settings into each client's own vocabulary."""
from __future__ import annotations

import asyncio
import ssl
from typing import Any, Callable

from ..errors import ConfigurationError
from ..settings import Secret, Settings


def aiokafka_common(settings: Settings) -> dict[str, Any]:
    """Connection options shared by aiokafka's consumer, producer and admin client."""
    opts: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "security_protocol": settings.effective_security_protocol,
    }
    if "SSL" in opts["security_protocol"]:
        from aiokafka.helpers import create_ssl_context

        try:
            context = opts["ssl_context"] = create_ssl_context(
                cafile=settings.ssl_cafile or None,
                capath=settings.ssl_capath or None,
                certfile=settings.ssl_certfile or None,
                keyfile=settings.ssl_keyfile or None,
                # a callable, never None: OpenSSL would prompt on the terminal for an encrypted key
                password=_reveal(settings.ssl_password) or _no_key_password,
            )
        except _NoKeyPassword:
            raise ConfigurationError(f"ssl_keyfile={settings.ssl_keyfile!r} is encrypted: set ssl_password "
                                     "(or ssl_password_file) to its password") from None
        except (ssl.SSLError, OSError) as exc:  # a missing, unreadable or mismatched file: no retry heals it
            from .auth_errors import explain

            raise ConfigurationError(explain(str(exc), settings) or (
                f"cannot load the TLS files (ssl_cafile={settings.ssl_cafile!r}, ssl_certfile="
                f"{settings.ssl_certfile!r}, ssl_keyfile={settings.ssl_keyfile!r}): {exc}")) from None
        context.check_hostname = settings.ssl_check_hostname
        if settings.ssl_crlfile:
            context.load_verify_locations(settings.ssl_crlfile)
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if settings.sasl_mechanism == "OAUTHBEARER":
        opts["sasl_mechanism"] = "OAUTHBEARER"
        opts["sasl_oauth_token_provider"] = _token_provider(settings.sasl_oauth_token)
    elif settings.sasl_mechanism:
        opts["sasl_mechanism"] = settings.sasl_mechanism
        opts["sasl_plain_username"] = settings.sasl_username
        opts["sasl_plain_password"] = _reveal(settings.sasl_password)
    return opts


def _token_provider(token: Callable[[], tuple[str, float]]) -> Any:
    """aiokafka's token provider around the setting's function (run in a thread: it may block)."""
    from aiokafka.abc import AbstractTokenProvider

    class TokenProvider(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka ships no type hints
        async def token(self) -> str:
            value, _expiry = await asyncio.to_thread(token)
            return value

    return TokenProvider()


def confluent_common(settings: Settings) -> dict[str, Any]:
    """Connection options shared by librdkafka's consumer, producer and admin client."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.effective_security_protocol.lower(),
    }
    for key, value in (
        ("ssl.ca.location", settings.ssl_cafile or settings.ssl_capath),
        ("ssl.crl.location", settings.ssl_crlfile),
        ("ssl.certificate.location", settings.ssl_certfile),
        ("ssl.key.location", settings.ssl_keyfile),
        ("ssl.key.password", _reveal(settings.ssl_password)),
    ):
        if value:
            conf[key] = value
    if not settings.ssl_check_hostname:
        conf["ssl.endpoint.identification.algorithm"] = "none"
    if settings.sasl_mechanism == "OAUTHBEARER":
        conf["sasl.mechanism"] = "OAUTHBEARER"
        if settings.sasl_oauth_token is not None:
            token = settings.sasl_oauth_token
            conf["oauth_cb"] = lambda _config: token()  # librdkafka calls it for each new token
        else:  # librdkafka fetches tokens itself (OIDC client credentials)
            conf.update({"sasl.oauthbearer.method": "oidc",
                         "sasl.oauthbearer.token.endpoint.url": settings.sasl_oauth_token_endpoint_url,
                         "sasl.oauthbearer.client.id": settings.sasl_oauth_client_id,
                         "sasl.oauthbearer.client.secret": _reveal(settings.sasl_oauth_client_secret)})
            if settings.sasl_oauth_scope:
                conf["sasl.oauthbearer.scope"] = settings.sasl_oauth_scope
    elif settings.sasl_mechanism:
        conf["sasl.mechanism"] = settings.sasl_mechanism
        conf["sasl.username"] = settings.sasl_username
        conf["sasl.password"] = _reveal(settings.sasl_password)
    return conf


class _NoKeyPassword(Exception):
    """OpenSSL asked for the key's password and none is configured."""


def _no_key_password() -> str:
    raise _NoKeyPassword


def _reveal(value: Any) -> str:
    return value.reveal() if isinstance(value, Secret) else (value or "")


def compression(settings: Settings) -> str | None:
    return None if settings.compression == "none" else settings.compression
