"""``streamkit spark``: run one agent of the app as a Spark Structured Streaming query."""
from __future__ import annotations

import sys

import click

from ..errors import ConfigurationError


@click.command("spark")
@click.option("-A", "--app", "app_spec", required=True, help="The app, as module:attribute.")
@click.argument("agent")
@click.option("--checkpoint", required=True, help="Spark checkpoint directory (offsets, state, commits).")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--available-now", is_flag=True, help="Process what the topic holds now, then stop.")
@click.option("--trigger", default=None, help="Micro-batch interval, e.g. '10 seconds' (default: back to back).")
@click.option("--max-offsets-per-trigger", type=int, default=None, help="Cap on records per micro-batch.")
@click.option("--no-handoff", is_flag=True, help="Do not commit progress to the app's consumer group.")
def spark(app_spec: str, agent: str, checkpoint: str, master: str, available_now: bool, trigger: str | None,
          max_offsets_per_trigger: int | None, no_handoff: bool) -> None:
    """Run AGENT on Spark until it stops (--available-now) or is interrupted."""
    from .main import load_app, setup_logging

    setup_logging("info")
    app = load_app(app_spec)
    app.spark_spec = app_spec if ":" in app_spec else f"{app_spec}:app"
    app.spark.master = master
    try:
        query = app.spark.run(agent, checkpoint=checkpoint, trigger="available-now" if available_now else trigger,
                              max_offsets_per_trigger=max_offsets_per_trigger, handoff=not no_handoff)
    except ConfigurationError as exc:
        click.echo(f"streamkit: {exc}", err=True)
        sys.exit(2)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    if not no_handoff:
        from ..spark.facade import handoff

        offsets = handoff(app.spark, query)
        if offsets:
            click.echo(f"committed {offsets} for group {app.id!r}: a worker continues from there")
    progress = query.recentProgress
    rows = sum(p.get("numInputRows", 0) for p in progress)
    click.echo(f"{agent}: {rows} records in {len(progress)} micro-batches")
