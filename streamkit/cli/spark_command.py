"""``streamkit spark``: run agents of the app as Spark Structured Streaming queries."""
from __future__ import annotations

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
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--available-now", is_flag=True, help="Process what the topic holds now, then stop.")
@click.option("--trigger", default=None, help="Micro-batch interval, e.g. '10 seconds' (default: back to back).")
@click.option("--max-offsets-per-trigger", type=int, default=None, help="Cap on records per micro-batch.")
@click.option("--no-handoff", is_flag=True, help="Do not commit progress to the app's consumer group.")
def spark(app_spec: str, agents: tuple[str, ...], checkpoint: str, master: str, available_now: bool,
          trigger: str | None, max_offsets_per_trigger: int | None, no_handoff: bool) -> None:
    """Run each of AGENTS on Spark until it stops (--available-now) or is interrupted.

    Several agents (a backfill of every agent of a topic, before a worker takes over) run one
    after the other in one Spark session, so the JVM starts once."""
    from .main import load_app, setup_logging

    if len(agents) > 1 and not available_now:
        click.echo("streamkit: several agents need --available-now: continuous queries run side by side would "
                   "commit their progress over each other's in the app's consumer group; run one "
                   "`streamkit spark` per agent instead", err=True)
        sys.exit(2)
    setup_logging("info")
    app = load_app(app_spec)
    app.spark_spec = app_spec if ":" in app_spec else f"{app_spec}:app"
    app.spark.master = master
    for agent in agents:
        where = checkpoint if len(agents) == 1 else os.path.join(checkpoint, agent)
        run_one(app, agent, where, trigger="available-now" if available_now else trigger,
                max_offsets_per_trigger=max_offsets_per_trigger, handoff=not no_handoff)


def run_one(app: Any, agent: str, checkpoint: str, *, trigger: str | None, max_offsets_per_trigger: int | None,
            handoff: bool) -> None:
    try:
        query = app.spark.run(agent, checkpoint=checkpoint, trigger=trigger,
                              max_offsets_per_trigger=max_offsets_per_trigger, handoff=handoff)
    except ConfigurationError as exc:
        click.echo(f"streamkit: {exc}", err=True)
        sys.exit(2)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    if handoff:
        from ..spark.facade import handoff as commit_progress

        offsets = commit_progress(app.spark, query)
        if offsets:
            click.echo(f"committed {offsets} for group {app.id!r}: a worker continues from there")
    progress = query.recentProgress
    rows = sum(p.get("numInputRows", 0) for p in progress)
    click.echo(f"{agent}: {rows} records in {len(progress)} micro-batches")
