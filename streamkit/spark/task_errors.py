"""A failure inside a Spark task, as one line for the user of ``streamkit spark``.

Spark hands an executor's Python exception to the driver wrapped in Java exceptions and a
traceback of both; the command's user needs the agent, the topic partition and the Python
exception. So a task raises ``TaskFailed`` carrying that line behind a marker, and the driver
finds the marker in whatever Spark raised (``one_line``); exit 2 for a configuration error, as
the worker's.
"""
from __future__ import annotations

import re

from ..errors import ConfigurationError

_MARK = "streamkit task failed (exit {code}): "
_FOUND = re.compile(r"streamkit task failed \(exit (\d)\): ([^\n]*)")
_PYTHON_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.*)$", re.M)


class TaskFailed(RuntimeError):
    """Raised by a task in place of the agent's or streamkit's own exception (chained)."""


def task_failed(agent: str, where: str, exc: BaseException) -> TaskFailed:
    code = 2 if isinstance(exc, ConfigurationError) else 1
    return TaskFailed(_MARK.format(code=code) + f"agent {agent!r} on {where}: {type(exc).__name__}: {exc}")


def one_line(exc: BaseException, agent: str) -> tuple[str, int]:
    """What went wrong, in one line, and the exit code: a task's own line when there is one,
    else the last Python exception Spark's text names, else its first line."""
    text = str(exc)
    found = _FOUND.search(text)
    if found:
        return found.group(2).strip(), int(found.group(1))
    errors = _PYTHON_ERROR.findall(text)
    if errors:
        kind, message = errors[-1]
        return f"agent {agent!r} failed on Spark: {kind}: {message.strip()}", 1
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"agent {agent!r} failed on Spark: {first}", 1
