"""How ``streamkit consume`` shows a record: one readable line, or one JSON object a line.

Raw bytes are shown as text when they are UTF-8, else as base64 (the JSON form says which in
``key_encoding``/``value_encoding``; the line form prefixes ``base64:``). With an app, keys and
values are decoded with the topic's declared types; a record that does not decode is shown raw
with the decode error, never skipped.
"""
from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

import orjson

from ..models.record import dumps
from ..transport.base import Message


def raw(data: bytes | None) -> tuple[Any, str | None]:
    """``(shown, encoding)``: text as it is ("utf-8"), other bytes as base64 ("base64"), None as None."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def iso(timestamp_ms: int | None) -> str | None:
    if timestamp_ms is None or timestamp_ms < 0:
        return None
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def headers_view(headers: list[tuple[str, bytes]]) -> list[list[Any]]:
    """``[name, value]`` pairs (repeated names kept, in order); a value that is not UTF-8 is
    ``{"base64": ...}``."""
    out: list[list[Any]] = []
    for name, value in headers:
        shown, encoding = raw(value)
        out.append([name, {"base64": shown} if encoding == "base64" else shown])
    return out


def plain(obj: Any) -> Any:
    """A decoded key or value as JSON-able data (models as their fields)."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, bytes):
        return raw(obj)[0]
    try:
        return orjson.loads(dumps(obj))
    except (TypeError, orjson.JSONDecodeError):
        return repr(obj)


class RecordView:
    """Shows records of one topic; ``topic`` (an app's Topic) decodes them, None shows them raw."""

    def __init__(self, topic: Any = None) -> None:
        self.topic = topic

    def fields(self, message: Message) -> dict[str, Any]:
        out: dict[str, Any] = {"topic": message.topic, "partition": message.partition, "offset": message.offset,
                               "timestamp_ms": message.timestamp_ms, "timestamp": iso(message.timestamp_ms)}
        for part, data in (("key", message.key), ("value", message.value)):
            decoded, error = self._decode(part, data)
            if error is None and self.topic is not None:
                out[part] = plain(decoded)
                continue
            out[part], out[f"{part}_encoding"] = raw(data)
            if error is not None:
                out[f"{part}_error"] = error
        out["headers"] = headers_view(message.headers)
        return out

    def _decode(self, part: str, data: bytes | None) -> tuple[Any, str | None]:
        if self.topic is None:
            return None, None
        codec = self.topic.key_codec if part == "key" else self.topic.value_codec
        try:
            return codec.decode(data), None
        except Exception as exc:  # any codec's failure: shown with the raw bytes
            return None, f"{type(exc).__name__}: {exc}"

    def json_line(self, message: Message) -> str:
        return orjson.dumps(self.fields(message)).decode()

    def text_line(self, message: Message) -> str:
        """``topic[partition]@offset timestamp key=... value=... headers``: keys and values as
        JSON when decoded, as text when UTF-8, else ``base64:...``."""
        fields = self.fields(message)
        parts = [f"{message.topic}[{message.partition}]@{message.offset}", fields["timestamp"] or "-"]
        for part in ("key", "value"):
            parts.append(f"{part}={self._shown(fields, part)}")
        for name, value in fields["headers"]:
            shown = f"base64:{value['base64']}" if isinstance(value, dict) else value
            parts.append(f"{name}={shown}")
        return "  ".join(parts)

    @staticmethod
    def _shown(fields: dict[str, Any], part: str) -> str:
        value, encoding = fields[part], fields.get(f"{part}_encoding")
        if value is None:
            return "null"
        if encoding == "base64":
            text = f"base64:{value}"
        elif encoding == "utf-8":
            text = value
        else:
            text = orjson.dumps(value).decode()
        error = fields.get(f"{part}_error")
        return f"{text} (not decoded: {error})" if error else text
