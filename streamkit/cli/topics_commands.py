"""``streamkit topics describe`` (partitions, offsets, configs) and ``streamkit topics delete``."""
from __future__ import annotations

import sys
from typing import Any

import click

from ..transport.base import TP
from ..transport.topic_reading import isolation, log_ends
from .common import Misuse, _admin_driver, load_app, run, with_topic_source


@click.command("describe")
@click.argument("name")
@with_topic_source
@click.option("--all-configs", is_flag=True, help="Also show the configs the topic takes from the broker's defaults.")
def topics_describe(name: str, app_spec: str | None, broker: str | None, driver: str | None,
                    all_configs: bool) -> None:
    """Topic NAME: each partition's leader, replicas, in-sync replicas and earliest/latest
    offsets, and the configs set on the topic (--all-configs: every config)."""
    from ..runtime.topic_admin import connect_admin

    drv, address, timeout = _admin_driver(app_spec, broker, driver)

    async def go() -> Any:
        admin = await connect_admin(drv, address, timeout)
        try:
            info = (await admin.describe_topics([name])).get(name)
            if info is None:
                return None
            partitions = (await admin.describe_partitions([name])).get(name, [])
            every = (await admin.topic_configs([name])).get(name, {})
            configs = every if all_configs else (await admin.topic_configs([name], set_only=True)).get(name, {})
        finally:
            await admin.stop()
        tps = [TP(name, p) for p in range(info.partitions)]
        consumer = drv.consumer(None, **isolation(drv.name, False))
        await consumer.start()
        try:
            earliest = await consumer.beginning_offsets(tps)
            latest = await log_ends(consumer, tps)
        finally:
            await consumer.stop()
        return info, partitions, configs, len(every), earliest, latest

    described = run(go())
    if described is None:
        raise click.ClickException(f"topic {name!r} does not exist")
    info, partitions, configs, reported, earliest, latest = described
    click.echo(f"{info.name}\tpartitions={info.partitions}\treplicas={info.replicas}")
    placed = {p.partition: p for p in partitions}
    for p in range(info.partitions):
        tp = TP(name, p)
        where = placed.get(p)
        nodes = (f"leader={where.leader}\treplicas={','.join(map(str, where.replicas))}\t"
                 f"isr={','.join(map(str, where.isr))}") if where else "leader=?\treplicas=?\tisr=?"
        click.echo(f"  partition={p}\t{nodes}\tearliest={earliest[tp]}\tlatest={latest[tp]}"
                   f"\trecords={latest[tp] - earliest[tp]}")
    title = "configs" if all_configs else "configs set on the topic"
    if not configs and reported and not all_configs:  # (the dev broker calls every config a default)
        click.echo(f"{title}: none reported as set on the topic (--all-configs shows the {reported} the broker has)")
    elif not configs:
        click.echo(f"{title}: none")
    else:
        click.echo(f"{title}:")
        for key in sorted(configs):
            click.echo(f"  {key}={configs[key]}")


@click.command("delete")
@click.argument("names", nargs=-1, required=True)
@with_topic_source
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="With -A: also delete topics that are not the app's.")
def topics_delete(names: tuple[str, ...], app_spec: str | None, broker: str | None, driver: str | None,
                  yes: bool, force: bool) -> None:
    """Delete the topics NAMES and every record in them (asks first, unless --yes).

    With -A only the app's own topics (declared, agents', internal) are deleted unless --force:
    the app's settings point at a cluster other apps may share. One line per topic says what
    happened; the exit status is 1 when any topic was missing or refused."""
    from ..runtime.topic_admin import connect_admin

    if app_spec and not force:
        app = load_app(app_spec)
        known = {t.name for t in app.all_topics()}
        foreign = [n for n in names if n not in known]
        if foreign:
            raise Misuse(f"{', '.join(map(repr, foreign))} not a topic of app {app.id!r}; "
                         "check the name, or pass --force to delete it anyway")
    drv, address, timeout = _admin_driver(app_spec, broker, driver)
    if not yes:
        click.confirm(f"Delete {len(names)} topic(s) and all their records ({', '.join(names)}) at {address}?",
                      abort=True, err=True)

    async def go() -> dict[str, str | None]:
        admin = await connect_admin(drv, address, timeout)
        try:
            existing = await admin.describe_topics(list(names))
            present = [n for n in names if n in existing]
            refused = await admin.delete_topics(present) if present else {}
        finally:
            await admin.stop()
        return {n: ("does not exist" if n not in existing else refused.get(n)) for n in names}

    outcome = run(go())
    for name in names:
        problem = outcome[name]
        click.echo(f"deleted {name}" if problem is None else f"not deleted {name}: {problem}")
    if any(problem is not None for problem in outcome.values()):
        sys.exit(1)
