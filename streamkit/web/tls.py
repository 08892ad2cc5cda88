"""TLS of the web server: its certificate, and the CAs it trusts when forwarding a query to
another worker over HTTPS. A file that does not load is a startup error naming the setting."""
from __future__ import annotations

import ssl

from ..errors import ConfigurationError
from ..settings import Settings


def server_context(conf: Settings) -> ssl.SSLContext | None:
    """None (plain HTTP) unless ``web_ssl_certfile`` is set."""
    if not conf.web_ssl_certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(conf.web_ssl_certfile, conf.web_ssl_keyfile or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"web_ssl_certfile={conf.web_ssl_certfile!r} / web_ssl_keyfile="
                                 f"{conf.web_ssl_keyfile!r} do not load ({exc}): give a PEM certificate and "
                                 "its unencrypted key") from None
    return context


def client_context(conf: Settings) -> ssl.SSLContext:
    """What a forwarded query verifies an ``https://`` member URL against."""
    try:
        return ssl.create_default_context(cafile=conf.web_ssl_cafile or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"web_ssl_cafile={conf.web_ssl_cafile!r} does not load ({exc})") from None
