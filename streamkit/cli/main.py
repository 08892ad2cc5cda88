"""The ``streamkit`` command: worker, send, agents, tables, topology, topics, dev-broker."""
from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

import click

from ..compiled import describe
from ..errors import ConfigurationError
from ..version import __version__
from .app_commands import CommandsOfTheApp
from .common import (
    LOG_LEVELS,  # noqa: F401  (the -l names; imported from here before common.py)
    LogLevel,
    Misuse,
    _admin_driver,
    app_option,
    load_app,
    run,
    setup_logging,
    with_topic_source,
)
from .send_target import send_target


@click.group(cls=CommandsOfTheApp)
@click.version_option(__version__, prog_name="streamkit", message=f"%(prog)s, version %(version)s\n{describe()}")
@click.option("-A", "--app", "app_spec", default=None, is_eager=True,  # before --help: it lists the app's commands
              help="The app, as module:attribute (here, as Faust takes it, or after the command).")
@click.pass_context
def cli(ctx: click.Context, app_spec: str | None) -> None:
    """Stream processing on Kafka."""
    if app_spec is not None:  # `streamkit -A app worker`: every command's -A defaults to it
        assert isinstance(ctx.command, click.Group)  # this very group
        ctx.default_map = _app_defaults(ctx.command, app_spec)


def _app_defaults(group: click.Group, app_spec: str) -> dict[str, Any]:
    """A click default_map giving ``app_spec`` to every (sub)command with an -A option."""
    defaults: dict[str, Any] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            defaults[name] = _app_defaults(command, app_spec)
        elif any(p.name == "app_spec" for p in command.params):
            defaults[name] = {"app_spec": app_spec}
    return defaults


def run_app_main(app: Any, argv: list[str] | None = None) -> None:
    """``app.main()``: the CLI with this app preselected, as ``python app.py worker`` in Faust."""
    owner = sys.modules.get("__main__")  # the script run as ``python app.py``
    names = [k for k, v in vars(owner).items() if v is app] if owner is not None else []
    if not names:
        raise click.ClickException("app.main() needs the app as a module-level variable of the script it runs")
    spec = f"__main__:{names[0]}"
    cli.main(args=argv if argv is not None else sys.argv[1:], prog_name=os.path.basename(sys.argv[0]),
             default_map=_app_defaults(cli, spec), obj={"streamkit.app_spec": spec})


@cli.command()
@app_option
@click.option("-l", "--loglevel", type=LogLevel(), default="info", show_default=True)
@click.option("--web-port", type=int, default=None, help="Port of the worker's web server (default 6066).")
@click.option("--web-host", default=None, help="Address the web server binds to (default 127.0.0.1).")
@click.option("--without-web", is_flag=True, help="Do not serve web views.")
@click.option("--data-dir", "--datadir", "data_dir", default=None,
              help="Where table stores live (one per worker on a machine); Faust's --datadir.")
@click.option("--processes", default="1", show_default=True, metavar="N|auto", callback=lambda _c, _p, v: _process_count(v),
              help="Run N workers of the app (N, or auto: the cores available) under one supervisor: "
                   "ports --web-port, +1, ...; data dirs <data-dir>/w1, w2, ...; one member stopping "
                   "stops all.")
def worker(app_spec: str, loglevel: str, web_port: int | None, web_host: str | None, without_web: bool,
           data_dir: str | None, processes: int) -> None:
    """Run a worker for the app until SIGINT/SIGTERM (--processes: N of them)."""
    from ..runtime import runner
    from . import supervisor

    setup_logging(loglevel)
    app = load_app(app_spec)
    # Options are settings of this app, applied before the worker starts (they win over code
    # and STREAMKIT_* variables, as command-line options do).
    for name, value in (("web_port", web_port), ("web_host", web_host), ("data_dir", data_dir),
                        ("web_enabled", False if without_web else None)):
        if value is not None:
            try:
                setattr(app.conf, name, value)
            except ConfigurationError as exc:
                raise Misuse(str(exc)) from None
    if processes == 1:
        sys.exit(runner.run_worker(app))
    try:
        members = supervisor.plan_members(app_spec, app.conf, processes, loglevel)
    except ConfigurationError as exc:
        raise Misuse(str(exc)) from None
    sys.exit(supervisor.supervise(members, app.conf.stop_timeout))


def _process_count(given: str) -> int:
    """``--processes``: refused in one line (exit 2) unless a whole number >= 1 or ``auto``."""
    from .supervisor import process_count

    try:
        return process_count(given)
    except ConfigurationError as exc:
        raise Misuse(str(exc)) from None


@cli.command()
@app_option
def tables(app_spec: str) -> None:
    """List the app's tables with partitions, store and changelog topic."""
    from ..runtime.planning import partitions_text, table_partitions
    from ..tables.manager import TableManager

    app = load_app(app_spec)
    counts = run(table_partitions(app, TableManager))  # as the worker settles them
    for table in app.tables.values():
        kind = "global" if table.is_global else "table"
        count = partitions_text(counts[table.name], app.conf.topic_partitions)
        click.echo(f"{table.name}\t{kind}\tpartitions={count}\tstore={table.store_url}\t"
                   f"changelog={table.changelog.name}\t{table.help}")


@cli.command()
@app_option
@click.argument("target")
@click.argument("value", required=False)
@click.option("--value", "value_option", default=None, help="Record value as JSON (or give it as VALUE).")
@click.option("-k", "--key", default=None, help="Record key (decoded with the key type when not a string).")
@click.option("-K", "--key-type", default=None,
              help="Model to build the key into (module.Model, or a name in the app's module).")
@click.option("-V", "--value-type", default=None, help="Model to build the value into (as --key-type).")
@click.option("--key-serializer", default=None, hidden=True)
@click.option("--value-serializer", default=None, hidden=True)
@click.option("--partition", type=click.IntRange(min=0), default=None)
@click.option("-r", "--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="Send the record n times.")
@click.option("--min-latency", type=click.FloatRange(min=0), default=0.0, help="Least pause between sends (s).")
@click.option("--max-latency", type=click.FloatRange(min=0), default=0.0, help="Longest pause between sends (s).")
@click.option("--timestamp", default=None, help="Seconds since the epoch, or ISO 8601 with an offset.")
@click.option("--header", "headers", multiple=True, help="NAME=VALUE record header (repeatable).")
@click.option("--file", "file", type=click.File("r"), default=None,
              help="Records as JSON lines (key, value, timestamp, headers, partition); - for stdin.")
def send(app_spec: str, target: str, value: str | None, value_option: str | None, key: str | None,
         key_type: str | None, value_type: str | None, key_serializer: str | None, value_serializer: str | None,
         partition: int | None, repeat: int, min_latency: float, max_latency: float, timestamp: str | None,
         headers: tuple[str, ...], file: Any) -> None:
    """Send records to a topic or an agent: TARGET VALUE, or @AGENT VALUE as in Faust."""
    from . import send_records as sr

    for option, given in (("--key-serializer", key_serializer), ("--value-serializer", value_serializer)):
        if given is not None:
            raise Misuse(f"{option}: streamkit send encodes with the topic's serializers; declare them on the "
                         f"topic (app.topic(..., {option[2:].replace('-', '_')}=...)) or send to another topic")
    if value is not None and value_option is not None:
        raise Misuse("give the value either as VALUE or with --value, not both")
    value = value if value is not None else value_option
    if file is not None and (value is not None or repeat != 1):
        raise Misuse("--file gives the records: drop VALUE/--value and --repeat (repeat lines in the file)")
    if file is None and value is None:
        raise Misuse("no value: give it as JSON (send TARGET '{\"amount\": 1}'), with --value, or records with --file")
    if min_latency > max_latency and max_latency:
        raise Misuse(f"--min-latency {min_latency} is above --max-latency {max_latency}")
    app = load_app(app_spec)
    try:
        topic = send_target(app, target)  # an undeclared topic is refused, not created
        typing = sr.Typing(topic, key_type and sr.model_by_name(app_spec, key_type),
                           value_type and sr.model_by_name(app_spec, value_type))
        defaults = sr.Outgoing(key, None, sr.timestamp_seconds(timestamp) if timestamp else None,
                               sr.header_pairs(headers), partition)
        if file is not None:  # every record is checked before anything connects
            records = sr.from_lines(typing, file, "stdin" if file.name == "<stdin>" else file.name, defaults)
        else:
            assert value is not None  # refused above when neither a value nor a file is given
            records = [sr.from_command_line(typing, value, defaults)] * repeat
    except ConfigurationError as exc:
        raise Misuse(str(exc)) from None

    async def go() -> list[tuple[int, int]]:
        try:
            await app.ensure_topics()  # bounded retry, clear error when unreachable
        except BaseException:
            await app.stop()
            raise
        try:
            return await sr.send_all(topic, records, min_latency, max_latency)
        finally:
            await app.stop()

    click.echo(sr.report(topic.name, target, run(go())))


@cli.command()
@app_option
def agents(app_spec: str) -> None:
    """List the app's agents with their topics."""
    app = load_app(app_spec)
    for agent in app.agents.values():
        sinks = ", ".join(getattr(s, "name", repr(s)) for s in agent.sinks) or "-"
        doc = (agent.fun.__doc__ or "").strip().splitlines()[0] if agent.fun.__doc__ else ""
        click.echo(f"{agent.name}\ttopic={agent.topic.name}\tconcurrency={agent.concurrency}\tsinks={sinks}\t{doc}")


@cli.command()
@app_option
@click.option("--format", "fmt", type=click.Choice(["text", "mermaid"]), default="text", show_default=True)
def topology(app_spec: str, fmt: str) -> None:
    """Print what a worker of the app reads, writes and keeps (no broker needed)."""
    logging.basicConfig(level="WARNING", stream=sys.stderr)
    app = load_app(app_spec)
    frozen = run(app.plan_topology())
    click.echo(frozen.describe() if fmt == "text" else frozen.mermaid())


@cli.group()
def topics() -> None:
    """List, create, describe and delete topics (-A: with the app's broker settings)."""


@topics.command("list")
@with_topic_source
def topics_list(app_spec: str | None, broker: str | None, driver: str | None) -> None:
    """Every topic on the broker with its partition count and replication factor."""
    from ..runtime.topic_admin import connect_admin

    drv, address, timeout = _admin_driver(app_spec, broker, driver)

    async def go() -> Any:
        admin = await connect_admin(drv, address, timeout)
        try:
            return await admin.describe_topics()
        finally:
            await admin.stop()

    for name, info in sorted(run(go()).items()):
        click.echo(f"{name}\tpartitions={info.partitions}\treplicas={info.replicas}")


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=int, default=1, show_default=True)
@click.option("--replicas", type=int, default=1, show_default=True)
@click.option("--config", "configs", multiple=True, help="key=value topic config (repeatable).")
@with_topic_source
def topics_create(name: str, partitions: int, replicas: int, configs: tuple[str, ...], app_spec: str | None,
                  broker: str | None, driver: str | None) -> None:
    """Create topic NAME (an existing one with the same partition count is left alone; with
    another count it is an error naming both)."""
    from ..runtime.topic_admin import ensure_topics
    from ..transport import TopicSpec

    drv, address, timeout = _admin_driver(app_spec, broker, driver)
    malformed = [c for c in configs if "=" not in c or not c.split("=", 1)[0]]
    if malformed:
        raise Misuse(f"--config takes key=value (e.g. retention.ms=86400000), got {malformed[0]!r}")
    config = dict(c.split("=", 1) for c in configs)
    spec = TopicSpec(name, partitions, replicas, config)
    run(ensure_topics(drv, address, [spec], {name: partitions}, timeout))
    click.echo(f"topic {name} ready with {partitions} partitions")


@cli.command("dev-broker")
@click.option("--port", type=int, default=None, help="Port on 127.0.0.1 (default: a free one).")
def dev_broker(port: int | None) -> None:
    """Run the bundled Kafka-compatible dev broker on loopback until interrupted."""
    from ..devbroker import start_dev_broker

    stopping: list[int] = []
    running: list[Any] = []

    def forward(signum: int, _frame: Any) -> None:
        # Only signal the child: the main thread may be inside process.wait(), which must not
        # be re-entered from a signal handler.
        stopping.append(signum)
        for broker in running:
            broker.process.terminate()

    # Installed before the address is printed, so a caller may signal as soon as it reads it.
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        broker = start_dev_broker(port)
    except ConfigurationError as exc:
        click.echo(f"streamkit: {exc}", err=True)
        sys.exit(2)
    running.append(broker)
    if stopping:
        broker.stop()
        sys.exit(0)
    click.echo(broker.address)
    sys.stdout.flush()
    code = broker.process.wait()
    sys.exit(0 if stopping else code)


def main() -> None:
    cli()


def _register_commands() -> None:
    """The subcommand modules' commands, in this group (they import common.py, not this module)."""
    from .acls_command import acls
    from .consume_command import consume
    from .dlq_command import dlq
    from .groups_command import groups
    from .models_command import model, models
    from .spark_command import spark
    from .state_commands import clean_versions, reset
    from .topics_commands import topics_delete, topics_describe

    for command in (acls, consume, dlq, groups, model, models, spark, clean_versions, reset):
        cli.add_command(command)
    cli.add_command(consume, "tail")
    for command in (topics_describe, topics_delete):
        topics.add_command(command)


_register_commands()
