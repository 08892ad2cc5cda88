"""``Record``: declare typed fields with annotations; JSON through orjson.

Every subclass becomes a slotted dataclass, so instances are small and construction is plain
attribute assignment; decoding validates once through a compiled plan (convert.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import orjson

from .convert import build_model

R = TypeVar("R", bound="Record")


def _default(obj: Any) -> Any:
    """orjson handles dataclasses, datetime, UUID and enums natively; the rest lands here."""
    from decimal import Decimal

    if isinstance(obj, Decimal):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def dumps(obj: Any) -> bytes:
    """orjson with the options streamkit uses everywhere (naive datetimes kept as given)."""
    return orjson.dumps(obj, default=_default, option=orjson.OPT_NON_STR_KEYS)


# Faust's Record class options: the values streamkit honours as Faust means them (Records are
# JSON, always validated, ISO datetimes and Decimals converted to the declared type, no
# ``__faust`` metadata written); any other value is refused with what to do instead.
_FAUST_OPTIONS: dict[str, tuple[Any, str]] = {
    "serializer": ("json", "streamkit Records are JSON; for another format declare the topic's value_type "
                           "with a Codec (streamkit.codecs)"),
    "coerce": (True, "streamkit always builds declared field types from JSON (datetimes, Decimals, nested "
                     "Records); leave coerce out"),
    "isodates": (True, "streamkit always parses ISO-8601 datetime fields; leave isodates out"),
    "validation": (True, "streamkit always validates Records when they are decoded; leave validation out"),
    "include_metadata": (False, "streamkit does not write Faust's __faust blessed key yet; pass "
                                "include_metadata=False (a Faust reader of such records needs the same)"),
}
_FAUST_REFUSED = {
    "namespace": "streamkit does not write Faust's __faust blessed key, so a namespace has no effect; remove it",
    "polymorphic_fields": "polymorphic Records are not supported; declare the concrete field types",
    "allow_blessed_key": "Faust's blessed keys are not supported; decode into the declared type",
    "decimals": "Decimal fields are always encoded as strings; remove decimals=",
    "date_parser": "datetime fields are parsed as ISO-8601; convert other formats in the agent",
    "abstract": "declare a plain base class (not a Record) for shared fields instead",
}


def _faust_options(name: str, kwargs: dict[str, Any]) -> None:
    """Take Faust's class options out of ``kwargs``: honoured, or refused with the reason."""
    for option in [k for k in kwargs if k in _FAUST_OPTIONS or k in _FAUST_REFUSED]:
        value = kwargs.pop(option)
        if option in _FAUST_OPTIONS:
            honoured, why = _FAUST_OPTIONS[option]
            if value == honoured:
                continue
            raise TypeError(f"class {name}(Record, {option}={value!r}): {why}")
        raise TypeError(f"class {name}(Record, {option}=...): {_FAUST_REFUSED[option]}")


class _RecordMeta(type):
    def __new__(mcs, name: str, bases: tuple, attrs: dict, **kwargs: Any) -> Any:
        _faust_options(name, kwargs)
        cls = super().__new__(mcs, name, bases, attrs)
        if "__slots__" in attrs or not bases:  # the base class, or dataclass's rebuilt class
            return cls
        allowed = {"frozen", "order", "eq", "kw_only", "repr", "unsafe_hash", "match_args"}
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError(f"class {name}(Record, {', '.join(sorted(unknown))}=...): unknown class option; "
                            f"Records take Faust's ({', '.join(sorted({*_FAUST_OPTIONS, *_FAUST_REFUSED}))}) "
                            f"and dataclass's ({', '.join(sorted(allowed))})")
        return dataclasses.dataclass(slots=True, **kwargs)(cls)


class Record(metaclass=_RecordMeta):
    """Base of typed records. ``class Order(Record): id: str; amount: float = 0.0``."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return orjson.loads(self.dumps())

    def dumps(self) -> bytes:
        return dumps(self)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        """Build and validate from a decoded JSON object; raises ValidationError naming the field."""
        return build_model(cls, data)

    @classmethod
    def loads(cls: type[R], data: bytes | str) -> R:
        return cls.from_dict(orjson.loads(data))


def is_model(tp: Any) -> bool:
    """True for a Record, a dataclass or a pydantic model class."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or hasattr(tp, "model_validate"))
