"""The App's hand-overs to what runs it besides its worker: ``app.main()`` and ``@app.command``
to the CLI (cli/), ``app.spark`` to Spark (spark/).

cli and spark import the App (app.py), so app.py does not import them back: it looks its
runners up in ``app.RUNNERS``, which this module fills when the streamkit package is imported
(streamkit/__init__.py). The CLI and Spark themselves are imported when first used, as before:
``import streamkit`` loads neither click's commands nor pyarrow.
"""
from __future__ import annotations

from typing import Any, Callable

from .app import RUNNERS, App
from .errors import ConfigurationError


def main(app: App, argv: list[str] | None) -> None:
    """``app.main()``: the streamkit CLI with this app (``python app.py worker``)."""
    from .cli.main import run_app_main

    run_app_main(app, argv)


def command(app: App, options: tuple[Any, ...], name: str | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@app.command(...)``: declares a CLI command of the app (cli/app_commands.py)."""
    from .cli.app_commands import declare

    return declare(app, options, name)


def spark(app: App) -> Any:
    """``app.spark``: the app's agents, topics and tables on Spark (spark/facade.py)."""
    try:
        from .spark.facade import SparkFacade
    except ImportError as exc:
        raise ConfigurationError(
            f"Spark support needs the spark extra: pip install 'streamkit[spark]' ({exc})") from None
    return SparkFacade(app)


RUNNERS.update(main=main, command=command, spark=spark)
