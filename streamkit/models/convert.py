"""Compile a type hint once into a function that turns decoded JSON into that type.

Validation happens here, once per record at the codec, so Record construction stays cheap.
Passthrough types (str, Any, ...) compile to None and cost nothing per record.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Optional

from .blessed import KEY, blessed_class
from .validation import ValidationError

Converter = Optional[Callable[[Any], Any]]


def _fail(expected: str, value: Any) -> typing.NoReturn:
    raise ValidationError(f"expected {expected}, got {type(value).__name__} {value!r:.60}")


def _check(tp: type, name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if type(value) is not tp:
            _fail(name, value)
        return value

    return check


def _to_float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    _fail("float", value)


def _to_datetime(value: Any) -> dt.datetime:
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            pass
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    _fail("ISO-8601 datetime", value)


def _to_date(value: Any) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        _fail("ISO-8601 date", value)


def _to_decimal(value: Any) -> Decimal:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            return Decimal(str(value))
        except InvalidOperation:
            pass
    _fail("decimal", value)


def _to_uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        _fail("UUID", value)


def _to_enum(tp: type[enum.Enum]) -> Callable[[Any], Any]:
    def conv(value: Any) -> Any:
        try:
            return tp(value)
        except ValueError:
            _fail(f"one of {[m.value for m in tp]}", value)

    return conv


def _to_list(item: Converter) -> Callable[[Any], Any]:
    def conv(value: Any) -> Any:
        if not isinstance(value, list):
            _fail("list", value)
        return value if item is None else [item(v) for v in value]

    return conv


def _to_dict(key: Converter, val: Converter) -> Callable[[Any], Any]:
    def conv(value: Any) -> Any:
        if not isinstance(value, dict):
            _fail("object", value)
        if key is None and val is None:
            return value
        k, v = key or (lambda x: x), val or (lambda x: x)
        return {k(a): v(b) for a, b in value.items()}

    return conv


def _optional(inner: Converter) -> Converter:
    if inner is None:
        return None

    def conv(value: Any) -> Any:
        return None if value is None else inner(value)

    return conv


def _from_model(tp: type) -> Callable[[Any], Any]:
    def conv(value: Any) -> Any:
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            _fail(f"object for {tp.__name__}", value)
        if KEY in value:  # a Faust blessed key may name the class (polymorphic Records)
            return build_model(blessed_class(value, tp) or tp, value)
        return build_model(tp, value)

    return conv


_NUMBERS = (int, float, Decimal)


def _union(members: list[Any]) -> Converter:
    """A real union (``datetime | float``), converted as msgspec's typed decoder (the codec's
    other path) reads one: a value whose JSON kind is a member's own stays as it is (a str in
    ``str | datetime``), a number goes to a numeric member first (never a timestamp when
    ``float`` is there), else the first member in declared order that takes it."""
    converters = [compile_converter(member) for member in members]
    if any(convert is None for convert in converters):  # Any, or a type taken as JSON gave it
        return None
    numeric = [c for m, c in zip(members, converters, strict=True) if m in _NUMBERS]
    kinds = tuple(m for m in members if m in (str, int, float, bool, list, dict))
    names = " | ".join(getattr(m, "__name__", str(m)) for m in members)

    def conv(value: Any) -> Any:
        if type(value) in kinds:
            return value
        tries = converters if isinstance(value, bool) or not isinstance(value, (int, float)) \
            else numeric + converters
        for convert in tries:
            try:
                return convert(value)  # type: ignore[misc]  # none is None (checked above)
            except ValidationError:
                continue
        _fail(names, value)

    return conv


def compile_converter(hint: Any) -> Converter:
    """A function that validates/converts a decoded JSON value to ``hint``; None = passthrough."""
    if hint is Any or hint is object or hint is None or hint is type(None):
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _optional(compile_converter(args[0]))
        union = _union(args)
        return union if len(args) == len(typing.get_args(hint)) else _optional(union)
    if origin in (list, set, tuple, frozenset, typing.Sequence) or hint in (list,):
        items = typing.get_args(hint)
        conv = _to_list(compile_converter(items[0]) if items else None)
        if origin in (set, frozenset, tuple):
            container = origin
            return lambda v: container(conv(v))
        return conv
    if origin in (dict, typing.Mapping) or hint is dict:
        pair = typing.get_args(hint)
        return _to_dict(*(compile_converter(a) for a in pair)) if pair else _to_dict(None, None)
    if typing.get_origin(hint) is typing.Literal:
        allowed = typing.get_args(hint)
        return lambda v: v if v in allowed else _fail(f"one of {allowed}", v)
    if not isinstance(hint, type):
        return None
    if hint is str:
        return _check(str, "string")
    if hint is bool:
        return _check(bool, "boolean")
    if hint is int:
        return _check(int, "integer")
    if hint is float:
        return _to_float
    if hint is bytes:
        return lambda v: v.encode() if isinstance(v, str) else _fail("string", v)
    if issubclass(hint, enum.Enum):
        return _to_enum(hint)
    if hint is dt.datetime:
        return _to_datetime
    if hint is dt.date:
        return _to_date
    if hint is Decimal:
        return _to_decimal
    if hint is uuid.UUID:
        return _to_uuid
    if dataclasses.is_dataclass(hint) or hasattr(hint, "model_validate"):
        return _from_model(hint)
    return None


@dataclasses.dataclass(frozen=True)
class FieldPlan:
    name: str
    convert: Converter
    required: bool


_PLANS: dict[type, tuple[FieldPlan, ...]] = {}


def model_plan(tp: type) -> tuple[FieldPlan, ...]:
    """Per-class list of fields with their converters, compiled on first use."""
    plan = _PLANS.get(tp)
    if plan is None:
        hints = typing.get_type_hints(tp)
        plan = tuple(
            FieldPlan(
                f.name,
                compile_converter(hints.get(f.name, Any)),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(tp)
            if f.init
        )
        _PLANS[tp] = plan
    return plan


def build_model(tp: type, data: dict) -> Any:
    """Validate ``data`` against ``tp`` (a Record, dataclass or pydantic model) and build it."""
    if hasattr(tp, "model_validate"):  # pydantic v2 validates itself
        return tp.model_validate(data)
    kwargs = {}
    for field in model_plan(tp):
        if field.name in data:
            value = data[field.name]
            if field.convert is not None:
                try:
                    value = field.convert(value)
                except ValidationError as exc:
                    raise ValidationError(f"{tp.__name__}.{field.name}: {exc}") from None
            kwargs[field.name] = value
        elif field.required:
            raise ValidationError(f"{tp.__name__}.{field.name}: required field is missing")
    return tp(**kwargs)
