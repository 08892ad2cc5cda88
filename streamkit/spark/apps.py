"""Find the app inside Spark's Python workers: tasks import it by ``module:attribute``.

An App holds clients, locks and compiled codecs that do not pickle, and its agents are
module-level objects anyway, so tasks re-import the module (once per worker process) instead.
"""
from __future__ import annotations

import sys
from typing import Any

from ..errors import ConfigurationError

_loaded: dict[str, Any] = {}


def load_app(spec: str) -> Any:
    """The App named by ``module:attribute``, imported once per worker process."""
    from ..app import import_app

    app = _loaded.get(spec)
    if app is None:
        app = _loaded[spec] = import_app(spec)
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
