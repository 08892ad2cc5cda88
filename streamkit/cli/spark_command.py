"""``streamkit spark``: run agents of the app as Spark Structured Streaming queries."""
from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from ..errors import ConfigurationError


@click.command("spark")
@click.option("-A", "--app", "app_spec", required=True, help="The app, as module:attribute.")
@click.argument("agents", nargs=-1, required=True)
@click.option("--checkpoint", required=True,
              help="Spark checkpoint directory (offsets, state, commits); with several agents, one "
                   "subdirectory per agent.")
@click.option("--master", default="local[2]", show_default=True,
              help="Spark master URL: local[N], spark://HOST:PORT, yarn, k8s://... On a cluster the app's package "
                   "is sent to the executors and checked there before any query starts.")
@click.option("--remote", default=None, help="Spark Connect (sc://...): refused, see docs/spark.md.")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting for the session (repeatable), e.g. spark.archives=env.tar.gz#env.")
@click.option("--py-files", "py_files", multiple=True, metavar="PATH",
              help="Also send this .py file, package directory or .zip to the executors (repeatable, or "
                   "comma-separated): modules the app imports from outside its own package.")
@click.option("--available-now", is_flag=True, help="Process what the topic holds now, then stop.")
@click.option("--trigger", default=None, help="Micro-batch interval, e.g. '10 seconds' (default: back to back).")
@click.option("--max-offsets-per-trigger", type=int, default=None, help="Cap on records per micro-batch.")
@click.option("--no-handoff", is_flag=True, help="Do not commit progress to the app's consumer group.")
def spark(app_spec: str, agents: tuple[str, ...], checkpoint: str, master: str, remote: str | None,
          confs: tuple[str, ...], py_files: tuple[str, ...], available_now: bool, trigger: str | None,
          max_offsets_per_trigger: int | None, no_handoff: bool) -> None:
    """Run each of AGENTS on Spark until it stops (--available-now) or is interrupted.

    Several agents (a backfill of every agent of a topic, before a worker takes over) run one
    after the other in one Spark session, so the JVM starts once."""
    from .common import load_app, setup_logging

    if len(agents) > 1 and not available_now:
        click.echo("streamkit: several agents need --available-now: continuous queries run side by side would "
                   "commit their progress over each other's in the app's consumer group; run one "
                   "`streamkit spark` per agent instead", err=True)
        sys.exit(2)
    if remote:
        _refuse(f"--remote {remote}: Spark Connect is not supported: streamkit registers a Python data source and "
                "sends the app's package through the SparkContext, which a Spark Connect client does not have; "
                "run with --master (spark://..., yarn, k8s://...) instead")
    settings = dict(_setting(item) for item in confs)
    setup_logging("info")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines are Spark's plumbing
    app = load_app(app_spec)
    app.spark_spec = app_spec if ":" in app_spec else f"{app_spec}:app"
    app.spark.master = master
    app.spark.conf.update(settings)
    app.spark.py_files = [part for item in py_files for part in item.split(",") if part]
    try:
        _ = app.spark.session  # started here: a missing module on the executors is said before any query
    except ConfigurationError as exc:
        _refuse(str(exc))
    for agent in agents:
        where = checkpoint if len(agents) == 1 else os.path.join(checkpoint, agent)
        run_one(app, agent, where, trigger="available-now" if available_now else trigger,
                max_offsets_per_trigger=max_offsets_per_trigger, handoff=not no_handoff)


def _refuse(message: str, code: int = 2) -> None:
    click.echo(f"streamkit: {message}", err=True)
    sys.exit(code)


def _setting(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        _refuse(f"--conf {item!r}: expected KEY=VALUE, e.g. --conf spark.executor.memory=2g")
    return key.strip(), value


def run_one(app: Any, agent: str, checkpoint: str, *, trigger: str | None, max_offsets_per_trigger: int | None,
            handoff: bool) -> None:
    from ..spark.task_errors import one_line

    try:
        query = app.spark.run(agent, checkpoint=checkpoint, trigger=trigger,
                              max_offsets_per_trigger=max_offsets_per_trigger, handoff=handoff)
    except ConfigurationError as exc:
        _refuse(str(exc))
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:  # a task failed (Spark gave up on it): one line, not Spark's traceback
        line, code = one_line(exc, agent)
        _refuse(line, code)
    if handoff:
        from ..spark.facade import handoff as commit_progress

        offsets = commit_progress(app.spark, query)
        if offsets:
            click.echo(f"committed {offsets} for group {app.id!r}: a worker continues from there")
    progress = query.recentProgress
    rows = sum(p.get("numInputRows", 0) for p in progress)
    click.echo(f"{agent}: {rows} records in {len(progress)} micro-batches")
