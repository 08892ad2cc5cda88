"""One conversion of a setting's value to its declared type, for every place a value comes from.

``App(commit_interval="soon")`` used to be kept as given and failed only inside the running
worker. Now ``App(...)`` keywords, ``app.conf.x = ...``, ``STREAMKIT_*`` variables and CLI
options all go through ``convert``: text that spells a value of the type is converted (``"5"``
for a number of seconds, as read from a config file or the environment; ``"off"`` for a flag),
anything else is a ConfigurationError naming the setting, the value and the type expected.
"""
from __future__ import annotations

import types
import typing
from datetime import timedelta
from enum import Enum
from typing import Any

from .errors import ConfigurationError

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class _Refused(Exception):
    """``expected`` is what the setting takes (the caller words the message)."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def convert(name: str, hint: Any, value: Any, *, shown: str | None = None, secret: bool = False) -> Any:
    """``value`` as the type ``hint`` declares, or ConfigurationError. ``shown`` names where it
    came from (``STREAMKIT_WEB_PORT``); a ``secret`` value is never repeated in the message."""
    shown = shown or name
    try:
        return _convert(hint, value)
    except _Refused as refused:
        got = "" if isinstance(value, str) else f", got {type(value).__name__}"
        said = "" if secret or _is_mapping(hint) else f"={value!r}"
        raise ConfigurationError(f"{shown}{said}: expected {refused.expected}{got}") from None
    except ValueError as exc:  # text that is not JSON: never echoed (it may hold credentials)
        raise ConfigurationError(f"{shown} is not a JSON object: {exc}") from None


def _convert(hint: Any, value: Any) -> Any:
    if hint is Any or (isinstance(hint, type) and issubclass(hint, Enum)):
        return value  # any value / a choice: Settings.validate checks it against its choices
    if hint is bool:
        return _bool(value)
    if hint is int:
        return _int(value)
    if hint is float:
        return _float(value)
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Refused("a string")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is dict:
        return _dict(value)
    if origin is list:
        if isinstance(value, (list, tuple)):
            return list(value)
        raise _Refused("a list")
    if origin in (typing.Union, types.UnionType):
        return _union(args, value)
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise _Refused(f"true or false ({'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)})")


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Refused("an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _Refused("an integer")


def _float(value: Any) -> float:
    expected = "a number of seconds (int, float, timedelta or numeric text)"
    if isinstance(value, bool):
        raise _Refused(expected)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _Refused(expected)


def _dict(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):  # JSON, as STREAMKIT_CONSUMER_CONFIG='{"...": ...}' gives it
        import orjson

        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise ValueError(str(exc)) from None
        if isinstance(parsed, dict):
            return parsed
    raise _Refused("a dict (or a JSON object)")


def _union(args: tuple[Any, ...], value: Any) -> Any:
    names = {getattr(a, "__name__", "") for a in args}
    if "Secret" in names:  # Secret | str
        if isinstance(value, str) or type(value).__name__ == "Secret":
            return value
        raise _Refused("a string or Secret")
    if bool in args:  # autodiscover: bool | list[str]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        if isinstance(value, str) and value.strip().lower() not in TRUE_WORDS + FALSE_WORDS:
            return [part.strip() for part in value.split(",") if part.strip()]  # "pkg_a,pkg_b"
        try:
            return _bool(value)
        except _Refused:
            raise _Refused("true, false or a list of package names") from None
    return value


def _is_mapping(hint: Any) -> bool:
    """Native client configs may hold credentials: their values are not repeated in messages."""
    return typing.get_origin(hint) is dict
