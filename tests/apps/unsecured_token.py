"""An unsecured JWS (``alg: none``) for OAUTHBEARER against a test broker with Kafka's unsecured
validator (tests/integration/test_security_kafka.py): ``STREAMKIT_SASL_OAUTH_TOKEN=
tests.apps.unsecured_token:token``. The subject comes from ``OAUTH_SUB`` (empty: no subject, which
the broker rejects); ``OAUTH_LIFETIME`` (seconds, default 3600) may be negative for an expired
token."""
from __future__ import annotations

import base64
import json
import os
import time


def _part(claims: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()


def token() -> tuple[str, float]:
    now = time.time()
    expiry = now + float(os.environ.get("OAUTH_LIFETIME", "3600"))
    claims: dict = {"iat": int(now) - 60, "exp": int(expiry)}
    if os.environ.get("OAUTH_SUB", "oauth-client"):
        claims["sub"] = os.environ.get("OAUTH_SUB", "oauth-client")
    return f"{_part({'alg': 'none'})}.{_part(claims)}.", expiry
