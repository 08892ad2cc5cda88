"""What an agent's body refers to: the globals it loads and the variables it closes over.

``inspect.getclosurevars`` reports every name in the code's ``co_names`` that is a module global,
attribute names included: ``stream.join(...)`` in a module with an agent called ``join`` would
look like the body uses that agent. Only LOAD_GLOBAL/LOAD_NAME instructions load a global.
"""
from __future__ import annotations

import builtins
import dis
import inspect
from typing import Any, Callable

_GLOBAL_LOADS = {"LOAD_GLOBAL", "LOAD_NAME"}


def referenced(fun: Callable[..., Any]) -> dict[str, Any]:
    """``{name: value}`` of the module globals the function (and code nested in it) loads, and
    of the variables it closes over."""
    fun = inspect.unwrap(fun)
    code = getattr(fun, "__code__", None)
    if code is None:
        return {}
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(i.argval for i in dis.get_instructions(current) if i.opname in _GLOBAL_LOADS)
        stack.extend(c for c in current.co_consts if inspect.iscode(c))
    module_globals = getattr(fun, "__globals__", {})
    found = {name: module_globals[name] for name in names if name in module_globals and not hasattr(builtins, name)}
    for name, cell in zip(code.co_freevars, fun.__closure__ or (), strict=True):
        try:
            found[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    return found
