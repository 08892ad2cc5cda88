"""What the streamkit command's subcommands share: loading the app, running a client coroutine
with one-line errors, the -A and topic-source options, log levels.

Below main.py (the ``streamkit`` group, which adds every subcommand module's commands) and the
subcommand modules, so none of them imports main.py back.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import click

from ..errors import AgentFailed, BrokerUnavailable, ConfigurationError


class Misuse(click.ClickException):
    """A command used wrongly (bad -A spec, option or value): one line naming the fix, exit 2,
    as click's own usage errors and the broker/configuration errors of ``run``."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"streamkit: {self.format_message()}", err=True)


def load_app(spec: str) -> Any:
    """Import ``module:attribute``; a wrong spec is a one-line CLI error."""
    from ..app import import_app

    try:
        return import_app(spec)
    except ConfigurationError as exc:
        raise Misuse(str(exc)) from None


def run(coro: Any) -> Any:
    """Run a client coroutine; broker and configuration errors, records the broker did not
    acknowledge, and an agent that cannot start while planning the topology become one line
    and exit 2."""
    from ..transport.pending import DeliveryFailed

    if not logging.getLogger().handlers:  # no -l here: the error line says what aiokafka's retries would
        logging.getLogger("aiokafka").addHandler(logging.NullHandler())
    try:
        return asyncio.run(coro)
    except (AgentFailed, BrokerUnavailable, ConfigurationError, DeliveryFailed) as exc:
        click.echo(f"streamkit: {exc}", err=True)
        sys.exit(2)


app_option = click.option("-A", "--app", "app_spec", required=True, help="The app, as module:attribute.")


# ``-l``: Faust's level names (crit, error, warn, info, debug) and Python's, in any case.
LOG_LEVELS = {"crit": logging.CRITICAL, "critical": logging.CRITICAL, "fatal": logging.CRITICAL,
              "error": logging.ERROR, "warn": logging.WARNING, "warning": logging.WARNING,
              "info": logging.INFO, "debug": logging.DEBUG}


class LogLevel(click.Choice):
    """A level of ``LOG_LEVELS``, any case; another is one line and exit 2 (``Misuse``)."""

    def __init__(self) -> None:
        super().__init__(list(LOG_LEVELS), case_sensitive=False)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            raise Misuse(f"-l/--loglevel {value!r}: not a log level; use one of {', '.join(LOG_LEVELS)}") from None


def setup_logging(level: str) -> None:
    logging.basicConfig(level=LOG_LEVELS[level.lower()], format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))


async def partitions_on_broker(drv: Any, address: str, timeout: float, topic: str) -> Any:
    """``topic``'s partitions as the broker has them (None: no such topic), through a short-lived
    admin client (consume, dlq replay)."""
    from ..runtime.topic_admin import connect_admin
    from ..transport.topic_reading import topic_partitions

    admin = await connect_admin(drv, address, timeout)
    try:
        return await topic_partitions(admin, topic)
    finally:
        await admin.stop()


def _admin_driver(app_spec: str | None, broker: str | None, driver: str | None) -> tuple[Any, str, float]:
    """The driver, bootstrap servers and ``broker_connect_timeout`` a topics command uses: the
    app's settings (``-A``) or the ``STREAMKIT_*`` ones, with ``--broker``/``--driver`` over either."""
    import dataclasses

    from ..settings import Settings, driver_of_url
    from ..transport import create_driver

    values: dict[str, Any] = {}
    if broker:
        values["broker"] = broker
    if driver:
        values["driver"] = driver
    elif broker and driver_of_url(broker):
        values["driver"] = driver_of_url(broker)
    try:
        if app_spec:
            app = load_app(app_spec)
            if not values:
                return app.driver, app.conf.bootstrap_servers, app.conf.broker_connect_timeout
            base = app.conf
        else:
            base = Settings.from_env()
        # the flags are the most specific choice: over STREAMKIT_* too (which override an app's code)
        settings = dataclasses.replace(base, **values)
    except ConfigurationError as exc:  # a STREAMKIT_* variable the settings refuse
        raise Misuse(str(exc)) from None
    return create_driver(settings), settings.bootstrap_servers, settings.broker_connect_timeout


topic_source = [
    click.option("-A", "--app", "app_spec", default=None, help="Use this app's broker settings."),
    click.option("--broker", default=None, help="Bootstrap servers (default: STREAMKIT_BROKER or 127.0.0.1:9092)."),
    click.option("--driver", default=None, type=click.Choice(["aiokafka", "confluent"])),
]


def with_topic_source(fn: Any) -> Any:
    for option in reversed(topic_source):
        fn = option(fn)
    return fn
