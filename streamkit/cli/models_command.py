"""``streamkit models`` and ``streamkit model NAME``: the Records an app's modules declare, as
Faust's ``faust models``/``faust model`` list them (namespace, fields and types)."""
from __future__ import annotations

import dataclasses
import typing
from typing import Any

import click

from .common import app_option, load_app

if typing.TYPE_CHECKING:
    from ..models.record import Record


def _records() -> dict[str, type[Record]]:
    from ..models.blessed import registry

    return dict(sorted(registry.items()))


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


@click.command()
@app_option
def models(app_spec: str) -> None:
    """List the Records the app's modules declare: namespace, then the class's first doc line."""
    load_app(app_spec)
    for namespace, cls in _records().items():
        doc = (cls.__doc__ or "").strip().splitlines()
        click.echo(f"{namespace}\t{doc[0] if doc and not doc[0].startswith(cls.__name__ + '(') else ''}".rstrip())


@click.command()
@app_option
@click.argument("name")
def model(app_spec: str, name: str) -> None:
    """Show one Record's fields: NAME is its namespace or class name."""
    load_app(app_spec)
    records = _records()
    matches = [records[name]] if name in records else [
        cls for cls in records.values() if name in (cls.__name__, cls.__qualname__)]
    if len(matches) != 1:
        known = ", ".join(records) or "none"
        raise click.ClickException(f"{'no' if not matches else 'more than one'} Record {name!r} (known: {known})")
    cls = matches[0]
    hints = typing.get_type_hints(cls)
    click.echo(f"{cls._options.namespace}")
    for field in dataclasses.fields(cls):
        default = ("" if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
                   else f" = {field.default!r}" if field.default is not dataclasses.MISSING else " = <factory>")
        click.echo(f"  {field.name}: {_type_name(hints.get(field.name, Any))}{default}")
