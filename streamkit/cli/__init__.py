"""cli layer (see docs/architecture.md). ``option``/``argument`` for ``@app.command`` (Faust's ``faust.cli.option``)."""
from .app_commands import argument, option

__all__ = ["option", "argument"]
