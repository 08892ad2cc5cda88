"""Faust's app-level settings, applied when a worker starts: ``logging_config``/``loghandlers``,
``timezone`` for crontabs declared without one, and ``autodiscover`` (settings.py
translates the names; these need the app's timers and import its modules, so they run here)."""
from __future__ import annotations

import importlib
import logging
import logging.config
import pkgutil
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..types.app import AppProtocol

log = logging.getLogger("streamkit.app")


def apply_faust_app_settings(app: "AppProtocol") -> None:
    """When a worker starts: Faust's ``logging_config``/``loghandlers``, ``timezone`` for crontabs
    declared without one, and ``autodiscover`` (import the modules that declare agents)."""
    conf = app.conf
    if conf.logging_config:
        logging.config.dictConfig(conf.logging_config)
    for handler in conf.loghandlers:
        if handler not in logging.getLogger().handlers:
            logging.getLogger().addHandler(handler)
    if conf.timezone:
        try:
            zone = ZoneInfo(conf.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigurationError(f"timezone={conf.timezone!r}: {exc}") from None
        for timer in app.timers:
            if timer.cron is not None and not timer.tz_given:
                timer.tz = zone
    for package in _discover_packages(conf.autodiscover, conf.origin):
        _import_all(package)


def _discover_packages(autodiscover: bool | list[str], origin: str) -> list[str]:
    if autodiscover is True:
        if not origin:
            raise ConfigurationError("autodiscover=True needs origin= (the app's package), as in Faust")
        return [origin]
    if autodiscover:
        return list(autodiscover)
    return []


def _import_all(package: str) -> None:
    """Import ``package`` and every module under it (Faust scans them with venusian)."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise ConfigurationError(f"autodiscover: cannot import {package!r}: {exc}") from None
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{package}."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        importlib.import_module(info.name)
        log.debug("autodiscover imported %s", info.name)
