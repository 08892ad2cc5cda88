"""How a table stores what it was given no type for: JSON that gives back the Python type.

``app.Table("tags", default=set)`` is how Faust users write a table; its values live in
RocksDB and the changelog as bytes and come back on every read after a checkpoint. Plain JSON
would hand back a ``list`` for a ``set`` (and the next ``.add`` fails), a string for a
``datetime``, a dict for a Record. So values that JSON has no type for are tagged:
``{"__sk__": "set", "v": [...]}``; JSON-native values (numbers, strings, lists, dicts with
string keys) are stored as they are, so other readers of the changelog see ordinary JSON.
Records (and dataclasses, pydantic models) are stored with their class (``module:Qualname``),
like Faust's ``__faust`` namespace, and rebuilt through their own validation.

Keys: a table partitions by the key's bytes (the same bytes as the topic's key codec, so a
table is co-partitioned with its source); a key that is not ``str``/``bytes`` (an int, a tuple)
and has no declared ``key_type`` would come back from iteration as the string of those bytes,
so its entry carries the key too: ``{"__sk__": "kv", "k": <key>, "v": <value>}``.
"""
from __future__ import annotations

import base64
import dataclasses
import importlib
import math
import uuid
from collections import deque
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import partial
from operator import is_not
from typing import Any, Callable, Sequence, cast

import msgspec
import orjson

from ..codecs import Codec, JsonCodec, RawCodec
from ..errors import DecodeError

TAG = "__sk__"
_PLAIN = (str, int, float, bool, type(None))
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1  # what JSON parsers (orjson) take as integers
ENTRY_PREFIX = b'{"__sk__":"kv",'
_TAGGED = b'"__sk__"'  # in a value that may need rebuilding (TypedJsonCodec.decode)

# msgspec, not orjson, writes table values: a checkpoint holds every changed key's encoded value
# until the store has it, and orjson (3.12 on) returns each in a ~4 KiB buffer whatever its
# length (a 3M distinct-key run held 371 MB of them); msgspec's are sized to fit, and it is as
# fast. Same JSON for the tagged data (JSON types only), up to float spelling (1e16 for 1e+16).
_compact_json = msgspec.json.Encoder().encode


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _class(name: str) -> type[Any]:
    module, _, qualname = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def tag(obj: Any) -> Any:
    """``obj`` as JSON-native data, with a tag wherever the JSON type alone would lose its type."""
    kind = type(obj)
    if kind is int and not _INT64_MIN <= obj <= _UINT64_MAX:
        return {TAG: "int", "v": str(obj)}
    if kind is float and not math.isfinite(obj):  # JSON has no inf/nan (orjson writes null)
        return {TAG: "float", "v": repr(obj)}
    if kind in _PLAIN:
        return obj
    if kind is list:
        return [tag(v) for v in obj]
    if kind is dict:
        if all(type(k) is str for k in obj):
            data = {k: tag(v) for k, v in obj.items()}
            return {TAG: "dict", "v": data} if TAG in obj else data
        return {TAG: "map", "v": [[tag(k), tag(v)] for k, v in obj.items()]}
    if kind is tuple:
        return {TAG: "tuple", "v": [tag(v) for v in obj]}
    if kind is set or kind is frozenset:
        return {TAG: kind.__name__, "v": [tag(v) for v in obj]}
    if kind is datetime:
        return {TAG: "datetime", "v": obj.isoformat()}
    if kind is date:
        return {TAG: "date", "v": obj.isoformat()}
    if kind is time:
        return {TAG: "time", "v": obj.isoformat()}
    if kind is timedelta:
        return {TAG: "timedelta", "v": [obj.days, obj.seconds, obj.microseconds]}
    if kind is Decimal:
        return {TAG: "decimal", "v": str(obj)}
    if kind is uuid.UUID:
        return {TAG: "uuid", "v": str(obj)}
    if kind is bytes:
        return {TAG: "bytes", "v": base64.b64encode(obj).decode()}
    if hasattr(obj, "model_dump"):  # pydantic
        return {TAG: "model", "c": _class_name(kind), "v": obj.model_dump(mode="json")}
    if dataclasses.is_dataclass(obj):  # Records: their own JSON, rebuilt and validated by the class
        return {TAG: "record", "c": _class_name(kind), "v": orjson.loads(_record_json(obj))}
    raise TypeError(
        f"a table value of type {kind.__name__} cannot be stored: use JSON types, set, frozenset, tuple, "
        "datetime, date, time, timedelta, Decimal, UUID, bytes, a Record or a pydantic model, or declare "
        "value_type= on the table with a codec for it")


def _record_json(obj: Any) -> bytes:
    from ..models.record import dumps

    return dumps(obj)


def _rebuild_record(name: str, data: Any) -> Any:
    cls = _class(name)
    if hasattr(cls, "from_dict"):
        return cls.from_dict(data)
    from ..models.convert import build_model

    return build_model(cls, data)


_UNTAG: dict[str, Callable[[Any], Any]] = {
    "int": lambda d: int(d["v"]),
    "float": lambda d: float(d["v"]),
    "dict": lambda d: {k: untag(v) for k, v in d["v"].items()},
    "map": lambda d: {untag(k): untag(v) for k, v in d["v"]},
    "tuple": lambda d: tuple(untag(v) for v in d["v"]),
    "set": lambda d: {untag(v) for v in d["v"]},
    "frozenset": lambda d: frozenset(untag(v) for v in d["v"]),
    "datetime": lambda d: datetime.fromisoformat(d["v"]),
    "date": lambda d: date.fromisoformat(d["v"]),
    "time": lambda d: time.fromisoformat(d["v"]),
    "timedelta": lambda d: timedelta(*d["v"]),
    "decimal": lambda d: Decimal(d["v"]),
    "uuid": lambda d: uuid.UUID(d["v"]),
    "bytes": lambda d: base64.b64decode(d["v"]),
    "model": lambda d: _class(d["c"]).model_validate(d["v"]),
    "record": lambda d: _rebuild_record(d["c"], d["v"]),
}


def untag(data: Any) -> Any:
    kind = type(data)
    if kind is list:
        return [untag(v) for v in data]
    if kind is dict:
        name = data.get(TAG)
        if name is None:
            return {k: untag(v) for k, v in data.items()}
        return _UNTAG[name](data)
    return data


class TypedJsonCodec(Codec):
    """Values of tables without a ``value_type``: tagged JSON (module docstring)."""

    name = "typed-json"

    def encode(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        kind = type(obj)
        if kind in _PLAIN and (kind is not float or math.isfinite(obj)) and (
                kind is not int or _INT64_MIN <= obj <= _UINT64_MAX):  # counters, names: no walk
            data = obj
        else:
            data = tag(obj)  # JSON types only
        try:
            return _compact_json(data)
        except Exception:  # (a lone surrogate in a str) orjson's rules decide, and name the problem
            return orjson.dumps(data)

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"invalid JSON: {exc}") from None
        if _TAGGED not in data:  # plain JSON: nothing to rebuild
            return value
        try:
            return untag(value)
        except Exception as exc:
            raise DecodeError(f"cannot rebuild a tagged table value: {type(exc).__name__}: {exc}") from None


def _all_plain_json(values: Sequence[bytes | None]) -> bool:
    """True if every value is None or JSON without a tag: a parse decides it (no decode).
    C-level loops only (one search of the joined values for the tag, a ``map`` of the parser):
    half the cost of a Python loop over the values, the biggest step of a restore."""
    present = cast("list[bytes]", list(filter(_is_present, values)))  # a C-level filter mypy cannot follow
    if b"" in present or _TAGGED in b"\x00".join(present):  # the tag holds no NUL: no match spans two
        return False
    try:
        deque(map(orjson.loads, present), 0)
    except orjson.JSONDecodeError:
        return False
    return True


_is_present = partial(is_not, None)


class TableEntries:
    """A table's encoding of (key, value) pairs: its value codec, plus the key where only the
    entry can carry its type (a non-str key without a declared key_type)."""

    def __init__(self, key_codec: Codec, value_codec: Codec, *, key_declared: bool) -> None:
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.key_declared = key_declared
        self._json_values = value_codec.name in ("json", "typed-json", "pydantic")
        # Plain JSON decodes wherever it parses: tagged JSON's untagged values, untyped json's all
        # (these very classes: a subclass may decode differently)
        self._parse_decides = type(value_codec) is TypedJsonCodec or (
            type(value_codec) is JsonCodec and value_codec.type is None)
        self._never_fails = type(value_codec) is RawCodec
        # orjson's output kept in a snapshot: each would hold a ~4 KiB buffer (_compact_json)
        self._trim = isinstance(value_codec, JsonCodec) and not value_codec.sized_output

    def carries_key(self, key: Any) -> bool:
        """True for keys iteration could not give back from their bytes alone."""
        return not self.key_declared and type(key) not in (str, bytes)

    def encode(self, key: Any, value: Any) -> bytes | None:
        """``key`` is None unless carries_key(key)."""
        if value is None or key is None:
            encoded = self.value_codec.encode(value)
            return bytes(memoryview(encoded)) if self._trim and encoded is not None else encoded
        if not self._json_values:
            raise TypeError(f"a table with a {self.value_codec.name} value codec needs key_type= declared "
                            f"for keys of type {type(key).__name__}")
        encoded = self.value_codec.encode(value)
        assert encoded is not None  # a value that is not None encodes to bytes
        return bytes(memoryview(orjson.dumps({TAG: "kv", "k": tag(key), "v": orjson.Fragment(encoded)})))

    def bad_values(self, values: Sequence[bytes | None]) -> list[tuple[int, BaseException]]:
        """``(index, problem)`` of each value this table could not read, for a restore to pass
        over. Where parsing decides (plain JSON, the common case) a batch costs one parse per
        value in one loop; anything tagged, or any failure, is decoded the way a read would."""
        if self._never_fails:
            return []
        if self._parse_decides and _all_plain_json(values):
            return []
        bad: list[tuple[int, BaseException]] = []
        decode = self.decode_value
        for index, raw in enumerate(values):
            if raw is not None:
                try:
                    decode(raw)
                except Exception as exc:
                    bad.append((index, exc))
        return bad

    def decode_value(self, raw: bytes) -> Any:
        if raw.startswith(ENTRY_PREFIX):
            return self.value_codec.decode(orjson.dumps(orjson.loads(raw)["v"]))
        return self.value_codec.decode(raw)

    def decode(self, key_bytes: bytes, raw: bytes) -> tuple[Any, Any]:
        if raw.startswith(ENTRY_PREFIX):
            entry = orjson.loads(raw)
            return untag(entry["k"]), self.value_codec.decode(orjson.dumps(entry["v"]))
        return self.key_codec.decode(key_bytes), self.value_codec.decode(raw)
