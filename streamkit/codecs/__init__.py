"""Codecs turn keys and values into bytes and back: json (orjson), raw and str. No pickle.

A topic derives its codecs from ``key_type``/``value_type``; decode failures raise DecodeError
with the reason, which the runtime routes to the error policy (never a silent drop).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, cast

import msgspec
import orjson

from ..errors import ConfigurationError, DecodeError
from ..models import blessed
from ..models.convert import ValidationError, compile_converter
from ..models.record import Record, dumps, is_model
from ..models.record import _orjson as _plain_dumps


class Codec:
    """Bytes in, object out, and back."""

    name = "codec"

    def encode(self, obj: Any) -> bytes | None:
        raise NotImplementedError

    def decode(self, data: bytes | None) -> Any:
        raise NotImplementedError

    def decode_many(self, datas: list[bytes | None]) -> list[Any]:
        """A fetched batch's keys or values, decoded as ``decode`` does each; raises if any one
        does not decode (the caller then decodes one at a time to learn which, so ``decode``
        sees those before it twice). Codecs override it with C-level loops: a Python call per
        record cost more than most decodes."""
        return list(map(self.decode, datas))


def _utf8_many(datas: list[bytes | None]) -> list[Any]:
    """UTF-8 bytes to str (None stays None) in one C-level loop where no datum is None."""
    if None in datas:
        return [None if data is None else data.decode() for data in datas]
    return list(map(bytes.decode, datas))  # type: ignore[arg-type]


class RawCodec(Codec):
    name = "raw"

    def encode(self, obj: Any) -> bytes | None:
        if obj is None or isinstance(obj, bytes):
            return obj
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise TypeError(f"raw codec needs bytes, got {type(obj).__name__}")

    def decode(self, data: bytes | None) -> Any:
        return data

    def decode_many(self, datas: list[bytes | None]) -> list[Any]:
        return datas


class StrCodec(Codec):
    name = "str"

    def encode(self, obj: Any) -> bytes | None:
        return None if obj is None else str(obj).encode()

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise DecodeError(f"not UTF-8: {exc}") from None

    def decode_many(self, datas: list[bytes | None]) -> list[Any]:
        return _utf8_many(datas)


def _typed_decoder(type_: Any) -> Callable[[bytes], Any] | None:
    """msgspec's decoder for a Record or dataclass type (JSON straight into the object, with the
    same checks the converters make); None where msgspec cannot express the type."""
    if not (isinstance(type_, type) and dataclasses.is_dataclass(type_)) or blessed.is_open(type_):
        return None
    try:
        return msgspec.json.Decoder(type_).decode
    except (TypeError, ValueError):
        return None


def _typed_encoder(type_: Any) -> Callable[[Any], bytes] | None:
    """msgspec's encoder where the type is a Record or dataclass: twice as fast as orjson with a
    ``default`` hook on slotted dataclasses. Same JSON, except that UTC datetimes end in ``Z``."""
    if not (isinstance(type_, type) and dataclasses.is_dataclass(type_)):
        return None
    encode = msgspec.json.Encoder(enc_hook=_encode_hook).encode

    def encode_typed(obj: Any) -> bytes:
        try:
            return encode(obj)
        except (TypeError, msgspec.EncodeError):  # orjson's rules decide, and name the problem
            return _plain_dumps(obj)

    if issubclass(type_, Record):  # Faust's blessed key, spliced into msgspec's bytes
        return blessed.record_encoder(type_, encode_typed, _plain_dumps, encode, (TypeError, msgspec.EncodeError))
    return encode_typed


def _encode_hook(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


class JsonCodec(Codec):
    """orjson; with a type, decoded values are validated and built into that type."""

    name = "json"

    def __init__(self, type_: Any = None) -> None:
        self.type = type_
        self._convert = compile_converter(type_) if type_ is not None else None
        self._typed = _typed_decoder(type_)
        typed_encode = _typed_encoder(type_)
        self._encode = typed_encode or dumps
        # msgspec's bytes are sized to fit; orjson's (3.12 on) sit in ~4 KiB buffers, which
        # matters where many are kept (a table's checkpoint snapshot: TableEntries trims them).
        self.sized_output = typed_encode is not None

    def encode(self, obj: Any) -> bytes | None:
        return None if obj is None else self._encode(obj)

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if self._typed is not None and not (blessed.redirect_targets and blessed.KEY_BYTES in data):
            # Records and dataclasses: parsed and validated in one C pass (a blessed key that may
            # select another class takes the general path)
            try:
                return self._typed(data)
            except msgspec.DecodeError:  # the converters decide, and name the problem their way
                pass
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            hint = ("; a str topic's values are JSON strings, as in Faust: declare value_serializer='raw' for "
                    "plain UTF-8") if self.type is str else ""
            raise DecodeError(f"invalid JSON: {exc}{hint}") from None
        try:
            if self._convert is None:
                # untyped: a Faust blessed key names the Record to build, as Faust does
                if type(value) is dict and blessed.KEY in value:
                    return Record.from_data(value)
                return value
            return self._convert(value)
        except ValidationError as exc:
            raise DecodeError(str(exc)) from None
        except Exception as exc:  # pydantic and user validators raise their own types
            raise DecodeError(f"{type(exc).__name__}: {exc}") from None

    def decode_many(self, datas: list[bytes | None]) -> list[Any]:
        """msgspec's parser mapped over the batch for Records and dataclasses, orjson's for
        untyped JSON (a dict with Faust's blessed key built into its Record, as ``decode`` does);
        anything else (a None, a value msgspec refuses but the converters may take) raises
        here, and the batch is decoded one by one."""
        raw = cast("list[bytes]", datas)  # a None among them raises in the join or the parser: see above
        if self._typed is not None:
            if blessed.redirect_targets and blessed.KEY_BYTES in b"".join(raw):
                return super().decode_many(datas)  # a blessed key may select another class
            return list(map(self._typed, raw))
        if self._convert is None:
            values = list(map(orjson.loads, raw))
            if blessed.KEY_BYTES not in b"".join(raw):
                return values
            key, from_data = blessed.KEY, Record.from_data
            return [from_data(value) if type(value) is dict and key in value else value for value in values]
        return super().decode_many(datas)


class PydanticCodec(Codec):
    """pydantic v2 models parse JSON bytes themselves (faster than dict-then-validate)."""

    name = "pydantic"

    def __init__(self, model: Any) -> None:
        self.type = model

    def encode(self, obj: Any) -> bytes | None:
        return None if obj is None else obj.model_dump_json().encode()

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self.type.model_validate_json(data)
        except Exception as exc:
            raise DecodeError(f"{type(exc).__name__}: {exc}") from None


class KeyCodec(Codec):
    """Default for untyped keys: bytes stay bytes, str is UTF-8 (so keys partition exactly as
    other clients' string keys do), anything else JSON; decoding yields str, or bytes if not UTF-8."""

    name = "key"

    def encode(self, obj: Any) -> bytes | None:
        if obj is None or isinstance(obj, bytes):
            return obj
        if isinstance(obj, str):
            return obj.encode()
        return dumps(obj)

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError:
            return data

    def decode_many(self, datas: list[bytes | None]) -> list[Any]:
        return _utf8_many(datas)  # a key that is not UTF-8 raises: decoded one by one, it stays bytes


CODECS: dict[str, type[Codec]] = {"raw": RawCodec, "str": StrCodec, "json": JsonCodec}


def codec_for(type_: Any = None, serializer: str | Codec | None = None, *, key: bool = False) -> Codec:
    """Pick the codec for a declared type, or the one named by ``serializer``."""
    if isinstance(serializer, Codec):
        return serializer
    if serializer is not None:
        if serializer not in CODECS:
            raise ConfigurationError(f"unknown serializer {serializer!r}; use one of {', '.join(CODECS)}")
        return JsonCodec(type_) if serializer == "json" else CODECS[serializer]()
    if type_ is None and key:
        return KeyCodec()
    if type_ is bytes:
        return RawCodec()
    if type_ is str:
        return StrCodec()
    if is_model(type_) and hasattr(type_, "model_validate_json"):
        return PydanticCodec(type_)
    return JsonCodec(type_)


__all__ = ["Codec", "RawCodec", "StrCodec", "JsonCodec", "PydanticCodec", "KeyCodec", "codec_for", "DecodeError"]
