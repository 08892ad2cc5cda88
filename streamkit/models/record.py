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


class _RecordMeta(type):
    def __new__(mcs, name: str, bases: tuple, namespace: dict, **kwargs: Any) -> Any:
        cls = super().__new__(mcs, name, bases, namespace)
        if "__slots__" in namespace or not bases:  # the base class, or dataclass's rebuilt class
            return cls
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
