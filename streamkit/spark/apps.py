"""Find the app inside Spark's Python workers: tasks import it by ``module:attribute``.

An App holds clients, locks and compiled codecs that do not pickle, and its agents are
module-level objects anyway, so tasks re-import the module (once per worker process) instead.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from ..errors import ConfigurationError

_loaded: dict[str, Any] = {}


def load_app(spec: str) -> Any:
    """The App named by ``module:attribute`` (cached per process)."""
    from ..app import App

    app = _loaded.get(spec)
    if app is not None:
        return app
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise ConfigurationError("an app is named as module:attribute")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    app = getattr(module, attr or "app", None)
    if not isinstance(app, App):
        raise ConfigurationError(f"{spec!r} is not a streamkit App")
    _loaded[spec] = app
    return app


def spec_of(app: Any) -> str:
    """``module:attribute`` under which ``app`` can be imported by a Spark task."""
    explicit = getattr(app, "spark_spec", None)
    if explicit:
        return explicit
    for name, module in list(sys.modules.items()):
        if name == "__main__" or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is app:
                return f"{name}:{attr}"
    raise ConfigurationError(
        f"app {app.id!r} is not a global of an importable module, so Spark tasks cannot import it; "
        "define it at module level (not in __main__), or run it with `streamkit spark -A module:app`")
