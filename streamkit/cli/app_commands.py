"""``@app.command``, as in Faust: an app's own CLI commands, next to ``worker``.

    from streamkit.cli import option

    @app.command(option("--count", type=int, default=10))
    async def produce(self, count: int) -> None:
        for i in range(count):
            await orders.send(value=i)

run as ``python app.py produce --count 3`` (``app.main()``) or ``streamkit -A app produce``.
``self`` is the command (``self.app``, ``self.say(text)``, as Faust's AppCommand). What the
command sent is flushed before it exits, and a broker or configuration error is one line.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

import click

if TYPE_CHECKING:
    from ..app import App

option = click.option
argument = click.argument


class AppCommand:
    """What a command function gets as ``self``."""

    def __init__(self, app: "App") -> None:
        self.app = app

    def say(self, text: Any) -> None:
        click.echo(text)


def declare(app: "App", options: tuple[Callable[[Any], Any], ...], name: str | None
            ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        command_name = (name or fun.__name__).replace("_", "-")
        doc = (inspect.getdoc(fun) or "").strip()

        def callback(**kwargs: Any) -> None:
            from .common import run

            async def go() -> None:
                try:
                    await app.configure()
                    result = fun(AppCommand(app), **kwargs)
                    if inspect.isawaitable(result):
                        await result
                    await app.flush()
                finally:
                    await app.stop()

            run(go())

        command: Any = click.Command(command_name, callback=callback, help=doc or None)
        for decorator in options:  # on a Command, each appends its parameter: arguments keep their order
            command = decorator(command)
        app.commands[command_name] = command
        return fun

    return decorate


class CommandsOfTheApp(click.Group):
    """The streamkit group, plus the commands of the app named by ``-A`` before the command."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._app_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self._app_commands(ctx).get(cmd_name)

    def _app_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        spec = ctx.params.get("app_spec") or (ctx.obj or {}).get("streamkit.app_spec")
        if not spec:
            return {}
        from .common import load_app

        return dict(load_app(spec).commands)
