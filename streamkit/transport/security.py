"""Translate the shared SSL/SASL/compression settings into each client's own vocabulary."""
from __future__ import annotations

import ssl
from typing import Any

from ..settings import Secret, Settings


def aiokafka_common(settings: Settings) -> dict[str, Any]:
    """Connection options shared by aiokafka's consumer, producer and admin client."""
    opts: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "security_protocol": settings.effective_security_protocol,
    }
    if "SSL" in opts["security_protocol"]:
        from aiokafka.helpers import create_ssl_context

        context = opts["ssl_context"] = create_ssl_context(
            cafile=settings.ssl_cafile or None,
            capath=settings.ssl_capath or None,
            certfile=settings.ssl_certfile or None,
            keyfile=settings.ssl_keyfile or None,
            password=_reveal(settings.ssl_password) or None,  # else OpenSSL prompts on the terminal
        )
        context.check_hostname = settings.ssl_check_hostname
        if settings.ssl_crlfile:
            context.load_verify_locations(settings.ssl_crlfile)
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if settings.sasl_mechanism:
        opts["sasl_mechanism"] = settings.sasl_mechanism
        opts["sasl_plain_username"] = settings.sasl_username
        opts["sasl_plain_password"] = _reveal(settings.sasl_password)
    return opts


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
    if settings.sasl_mechanism:
        conf["sasl.mechanism"] = settings.sasl_mechanism
        conf["sasl.username"] = settings.sasl_username
        conf["sasl.password"] = _reveal(settings.sasl_password)
    return conf


def _reveal(value: Any) -> str:
    return value.reveal() if isinstance(value, Secret) else (value or "")


def compression(settings: Settings) -> str | None:
    return None if settings.compression == "none" else settings.compression
