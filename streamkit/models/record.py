"""``Record``: declare typed fields with annotations; JSON through orjson.

Every subclass becomes a slotted dataclass, so instances are small and construction is plain
attribute assignment; decoding validates once through a compiled plan (convert.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

import orjson

from .blessed import KEY, RecordOptions, blessed_class, default_namespace, record_encoder, register, representation
from .convert import ValidationError, build_model

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


def _orjson(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_default, option=orjson.OPT_NON_STR_KEYS)


def dumps(obj: Any) -> bytes:
    """orjson with the options streamkit uses everywhere (naive datetimes kept as given); a
    Record carries Faust's blessed key unless its class says ``include_metadata=False``."""
    if isinstance(obj, Record):
        return _record_dumps(obj)
    return _orjson(obj)


# Faust's Record class options: the values streamkit honours as Faust means them (Records are
# JSON, always validated, ISO datetimes and Decimals converted to the declared type); any other
# value is refused with what to do instead. The blessed-key options live in blessed.py.
_FAUST_OPTIONS: dict[str, tuple[Any, str]] = {
    "serializer": ("json", "streamkit Records are JSON; for another format declare the topic's value_type "
                           "with a Codec (streamkit.codecs)"),
    "coerce": (True, "streamkit always builds declared field types from JSON (datetimes, Decimals, nested "
                     "Records); leave coerce out"),
    "isodates": (True, "streamkit always parses ISO-8601 datetime fields; leave isodates out"),
    "validation": (True, "streamkit always validates Records when they are decoded; leave validation out"),
}
_BLESSED_OPTIONS = ("namespace", "include_metadata", "allow_blessed_key", "polymorphic_fields", "abstract")
_FAUST_REFUSED = {
    "decimals": "Decimal fields are always encoded as strings; remove decimals=",
    "date_parser": "datetime fields are parsed as ISO-8601; convert other formats in the agent",
}
_DATACLASS_OPTIONS = {"frozen", "order", "eq", "kw_only", "repr", "unsafe_hash", "match_args"}


def _faust_options(name: str, bases: tuple, kwargs: dict[str, Any]) -> RecordOptions:
    """Take Faust's class options out of ``kwargs``: honoured, or refused with the reason."""
    inherited = next((b._options for b in bases if isinstance(getattr(b, "_options", None), RecordOptions)),
                     RecordOptions())
    options = dataclasses.replace(inherited, namespace="", abstract=False)
    for option in [k for k in kwargs if k in _FAUST_OPTIONS or k in _FAUST_REFUSED or k in _BLESSED_OPTIONS]:
        value = kwargs.pop(option)
        if option in _BLESSED_OPTIONS:
            setattr(options, option, value)
            continue
        if option in _FAUST_OPTIONS:
            honoured, why = _FAUST_OPTIONS[option]
            if value == honoured:
                continue
            raise TypeError(f"class {name}(Record, {option}={value!r}): {why}")
        raise TypeError(f"class {name}(Record, {option}=...): {_FAUST_REFUSED[option]}")
    unknown = set(kwargs) - _DATACLASS_OPTIONS
    if unknown:
        raise TypeError(f"class {name}(Record, {', '.join(sorted(unknown))}=...): unknown class option; "
                        f"Records take Faust's ({', '.join(sorted({*_FAUST_OPTIONS, *_BLESSED_OPTIONS, *_FAUST_REFUSED}))}) "
                        f"and dataclass's ({', '.join(sorted(_DATACLASS_OPTIONS))})")
    return options


def _abstract_init(self: Any, *args: Any, **kwargs: Any) -> None:
    raise NotImplementedError(f"{type(self).__name__} is an abstract Record (abstract=True): instantiate one of "
                              "its subclasses")


class _RecordMeta(type):
    def __new__(mcs, name: str, bases: tuple, attrs: dict, **kwargs: Any) -> Any:
        if "__slots__" in attrs or not bases:  # the base class, or dataclass's rebuilt class
            return super().__new__(mcs, name, bases, attrs)
        options = _faust_options(name, bases, kwargs)
        cls: Any = dataclasses.dataclass(super().__new__(mcs, name, bases, attrs), slots=True, **kwargs)
        options.namespace = options.namespace or default_namespace(cls)
        cls._options = options
        if options.abstract:
            cls.__init__ = _abstract_init
        else:
            register(cls, options)
        return cls


class Record(metaclass=_RecordMeta):
    """Base of typed records. ``class Order(Record): id: str; amount: float = 0.0``.

    Faust's Record API: ``asdict()``, ``to_representation()`` (with the ``__faust`` blessed key
    unless ``include_metadata=False``), ``dumps()``/``loads()``, ``from_data()``,
    ``validate()``/``is_valid()``, ``derive()``; class options as Faust has them.
    """

    __slots__ = ()
    _options: ClassVar[RecordOptions]
    # set on each subclass by the metaclass's dataclass(); declared for the type checker
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def asdict(self) -> dict[str, Any]:
        """The fields as a dict (nested Records stay objects), as Faust's ``asdict``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_representation(self) -> dict[str, Any]:
        """JSON-ready data: nested Records as dicts, each with its blessed key where included."""
        return representation(self)

    def to_dict(self) -> dict[str, Any]:
        return orjson.loads(self.dumps())

    def dumps(self, *, serializer: str | None = None) -> bytes:
        _json_only(serializer)
        return dumps(self)

    def derive(self: R, *objects: Any, **fields: Any) -> R:
        """A copy with the fields of ``objects`` and then ``fields`` laid over this one's."""
        data = self.asdict()
        for obj in objects:
            data.update(obj.asdict())
        return type(self)(**{**data, **fields})

    def validate(self) -> list[ValidationError]:
        """The fields that do not fit their declared types (empty when valid), as Faust's ``validate``.

        Decoding always validates; this checks a Record built in code."""
        try:
            build_model(type(self), orjson.loads(dumps(self)))
        except ValidationError as exc:
            return [exc]
        return []

    def is_valid(self) -> bool:
        return not self.validate()

    @property
    def validation_errors(self) -> list[ValidationError]:
        return self.validate()

    @classmethod
    def from_data(cls: type[R], data: Any, *, preferred_type: type | None = None) -> R:
        """Build from decoded JSON; a blessed key may select a registered class, as in Faust."""
        if isinstance(data, Record):
            return data  # type: ignore[return-value]
        target = blessed_class(data, preferred_type) if preferred_type is not None or KEY in data else None
        return build_model(target or cls, data)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        """Build and validate from a decoded JSON object; raises ValidationError naming the field."""
        return cls.from_data(data, preferred_type=cls)

    @classmethod
    def loads(cls: type[R], data: bytes | str, *, default_serializer: str | None = None,
              serializer: str | None = None) -> R:
        _json_only(serializer or default_serializer)
        return cls.from_data(orjson.loads(data), preferred_type=cls)


_record_dumps = record_encoder(Record, _orjson, _orjson)


def _json_only(serializer: str | None) -> None:
    if serializer not in (None, "json"):
        raise ValueError(f"Records are JSON in streamkit, not {serializer!r}: for another format declare the "
                         "topic's value_type with a Codec (streamkit.codecs)")


def is_model(tp: Any) -> bool:
    """True for a Record, a dataclass or a pydantic model class."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or hasattr(tp, "model_validate"))
