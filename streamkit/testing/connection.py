"""The connection settings of the test helpers' own Kafka clients.

A helper given only an address (``STREAMKIT_TEST_BROKER``) still connects as the apps under test
do: TLS, SASL and their secrets come from the same ``STREAMKIT_*`` variables, so a secured broker
needs no other configuration. A helper given an app's ``Settings`` uses those.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..settings import Settings
from ..transport.security import confluent_common


def client_settings(where: "str | Settings") -> Settings:
    """``where`` itself when it is Settings; else the ``STREAMKIT_*`` settings aimed at that address."""
    if isinstance(where, Settings):
        return where
    return dataclasses.replace(Settings.from_env(), broker=where)


def confluent_conf(where: "str | Settings", **extra: Any) -> dict[str, Any]:
    """librdkafka settings for a helper's client: the connection of ``where`` plus ``extra``."""
    return {**confluent_common(client_settings(where)), **extra}
