"""``streamkit reset`` and ``streamkit clean-versions``: an app's state, removed on purpose.

``reset`` is Kafka Streams' application reset plus Faust's ``reset``: the consumer group (so
the next worker starts from ``auto_offset_reset``), the internal topics whose content was
derived from input (table changelogs, group_by repartition topics, the app's leader, replies
and cluster topics) and this machine's table stores. Input topics, sinks, ``through`` topics
and the dead-letter topic are data, and stay. It refuses while a worker of the app runs on this
machine (its slot lock is held) or in the group (the broker refuses to delete a live group).

``clean-versions`` deletes this machine's table stores of the app's other versions (Faust's
``version=`` gives every version its own id: ``<id>-v<n>``), never the current one's.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
from pathlib import Path
from typing import Any

import click

from .common import app_option, load_app, run


def _running_slots(base: Path) -> list[str]:
    """Worker slot locks under ``base`` that a running worker holds."""
    held = []
    for lock in sorted(base.glob("worker-*.lock")):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(lock.name)
        finally:
            os.close(fd)
    return held


def _refuse_if_running(base: Path, app_id: str) -> None:
    held = _running_slots(base) if base.is_dir() else []
    if held:
        raise click.ClickException(f"a worker of {app_id!r} runs on this machine ({', '.join(held)} under {base}): "
                                   "stop it first")


async def internal_topics(app: Any) -> list[str]:
    """The topics whose content the app derived from its input: changelogs, repartition topics
    and its own coordination topics."""
    topology = await app.plan_topology()
    return app.derived_topics(t for agent in topology.agents for t in (*agent.reads, *agent.writes))


@click.command()
@app_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def reset(app_spec: str, yes: bool) -> None:
    """Delete the app's consumer group, internal topics and local table state (see the docs)."""
    app = load_app(app_spec)
    base = Path(app.conf.data_dir) / app.id
    _refuse_if_running(base, app.id)
    topics = run(internal_topics(app))
    click.echo(f"This deletes, for app {app.id!r} on {app.conf.bootstrap_servers}:\n"
               f"  the consumer group {app.id!r} (its committed offsets)\n"
               f"  the internal topics {', '.join(topics)}\n"
               f"  the local table state in {base}")
    for table in app.tables.values():  # internal topics only: a declared topic is the user's
        if table.changelog_declared:
            click.echo(f"It keeps topic {table.changelog.name}, declared by the app as the changelog of table "
                       f"{table.name!r} (changelog_topic=): the next start restores the table from its records, "
                       "and the input read again adds to them; delete or compact it yourself to start anew")
    if not yes:
        click.confirm("Reset?", abort=True)

    async def go() -> tuple[str | None, dict[str, str]]:
        admin = app.driver.admin()
        await admin.start()
        try:
            return await admin.delete_group(app.id), await admin.delete_topics(topics)
        finally:
            await admin.stop()

    group_refused, topics_refused = run(go())
    if group_refused:
        raise click.ClickException(f"the broker did not delete group {app.id!r}: {group_refused} (stop every worker "
                                   "of the app, then reset again)")
    if topics_refused:
        raise click.ClickException("the broker did not delete: " + ", ".join(f"{t} ({why})" for t, why
                                                                            in topics_refused.items()))
    if base.is_dir():
        shutil.rmtree(base)
    click.echo(f"reset {app.id!r}: group, {len(topics)} internal topic(s) and local state deleted")


@click.command("clean-versions")
@app_option
def clean_versions(app_spec: str) -> None:
    """Delete this machine's table stores of the app's other versions."""
    app = load_app(app_spec)
    data_dir = Path(app.conf.data_dir)
    given = app._given_id  # noqa: SLF001 - the id as given, before App derives it
    pattern = re.compile(rf"^{re.escape(given)}(-v\d+)?$")
    removed = []
    for path in sorted(data_dir.iterdir()) if data_dir.is_dir() else []:
        if path.is_dir() and pattern.match(path.name) and path.name != app.id:
            _refuse_if_running(path, path.name)
            shutil.rmtree(path)
            removed.append(path.name)
    click.echo(f"removed {', '.join(removed)}" if removed else f"no other version of {given!r} under {data_dir}")
