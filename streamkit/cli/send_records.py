"""The records ``streamkit send`` sends: built from the command line or a file of JSON lines,
checked against the target's types before anything connects, then sent through one producer.

Faust's ``faust send`` forms are taken (``@agent VALUE``, ``-k``, ``-K``/``-V`` naming a model as
Faust finds it, ``--repeat``, ``--min-latency``/``--max-latency``). A file (``-`` for stdin) holds
one JSON object a line with ``key``, ``value``, ``timestamp``, ``headers``, ``partition``; the
command line's ``--key``/``--timestamp``/``--header``/``--partition`` are its lines' defaults.
"""
from __future__ import annotations

import asyncio
import importlib
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Iterable

import orjson

from ..codecs import codec_for
from ..errors import ConfigurationError

FILE_FIELDS = ("key", "value", "timestamp", "headers", "partition")
_STRINGS = (None, str, bytes)  # key types a --key string is given to as it is


@dataclass
class Outgoing:
    """One record to send, built into the target topic's types."""

    key: Any
    value: Any
    timestamp: float | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int | None = None


@dataclass
class Typing:
    """How keys and values are built: the topic's types, or the ``-K``/``-V`` models."""

    topic: Any
    key_model: Any = None
    value_model: Any = None


def model_by_name(app_spec: str, name: str) -> Any:
    """Faust's ``import_relative_to_app``: ``module.Model``, else ``<app module>.models.<name>``,
    else ``<app module>.<name>``."""
    root = app_spec.partition(":")[0]
    for candidate in (name, f"{root}.models.{name}", f"{root}.{name}"):
        module, _, attr = candidate.rpartition(".")
        if not module:
            continue
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    raise ConfigurationError(f"model {name!r} not found: name it as module.Model, or as a name in {root} "
                             f"or {root}.models")


def header_pairs(items: Iterable[str]) -> list[tuple[str, bytes]]:
    """``NAME=VALUE`` options as record headers."""
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigurationError(f"--header takes NAME=VALUE (e.g. trace-id=abc), got {item!r}")
        pairs.append((name, value.encode()))
    return pairs


def timestamp_seconds(text: str) -> float:
    """``--timestamp``: seconds since the epoch (Faust's unit), or ISO 8601 with a UTC offset."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(f"--timestamp {text!r}: give seconds since the epoch (1700000000.5) or an "
                                 "ISO 8601 time with its offset (2024-01-31T12:00:00Z)") from None
    if moment.tzinfo is None:
        raise ConfigurationError(f"--timestamp {text!r} has no UTC offset: add one (Z or +01:00)")
    return moment.timestamp()


def typed_key(typing: Typing, key: Any) -> Any:
    """A key from the command line (a string) or a file (any JSON), built into its type: a
    string goes to a str/bytes/untyped key as it is, else it is decoded as the key's JSON."""
    model = typing.key_model
    key_type = model or typing.topic.key_type
    if key is None or (isinstance(key, str) and key_type in _STRINGS):
        return key
    codec = codec_for(model, key=True) if model is not None else typing.topic.key_codec
    raw = key.encode() if isinstance(key, str) else orjson.dumps(key)
    try:
        return codec.decode(raw)
    except Exception as exc:
        name = getattr(key_type, "__name__", str(key_type))
        raise ConfigurationError(f"key {key!r} does not fit {name}, the key type of {typing.topic.name!r}: "
                                 f"{exc}") from None


def typed_value(typing: Typing, decoded: Any) -> Any:
    """A value (decoded JSON) built into the ``-V`` model or the topic's value type."""
    topic = typing.topic
    if typing.value_model is not None:
        try:
            return codec_for(typing.value_model).decode(orjson.dumps(decoded))
        except Exception as exc:
            raise ConfigurationError(f"value does not fit {typing.value_model.__name__}: {exc}") from None
    codec = topic.value_codec
    if codec.name == "raw" and isinstance(decoded, str):
        return decoded.encode()  # a bytes topic: the JSON string's UTF-8 bytes
    if topic.value_type is None or codec.name not in ("json", "pydantic"):
        return decoded
    try:
        return codec.decode(orjson.dumps(decoded))
    except Exception as exc:
        name = getattr(topic.value_type, "__name__", str(topic.value_type))
        raise ConfigurationError(f"value does not fit {name}, the value type of {topic.name!r}: {exc}") from None


def checked(typing: Typing, record: Outgoing) -> Outgoing:
    """``record`` if the topic's codecs can encode it (else a ConfigurationError): a record that
    cannot go is found before any is sent."""
    topic = typing.topic
    for what, codec, obj in (("key", topic.key_codec, record.key), ("value", topic.value_codec, record.value)):
        try:
            codec.encode(obj)
        except Exception as exc:
            hint = "; pass a JSON string ('\"text\"') for str and bytes topics" if what == "value" else ""
            raise ConfigurationError(f"{what} {obj!r} cannot go to {topic.name!r} ({codec.name} {what}s): "
                                     f"{exc}{hint}") from None
    return record


def from_command_line(typing: Typing, value: str, defaults: Outgoing) -> Outgoing:
    """The record of ``send TARGET VALUE``: VALUE is JSON."""
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise ConfigurationError(f"the value is not JSON: {exc} (a string is quoted: '\"text\"')") from None
    return checked(typing, Outgoing(typed_key(typing, defaults.key), typed_value(typing, decoded), defaults.timestamp,
                                    list(defaults.headers), defaults.partition))


def from_lines(typing: Typing, lines: IO[str], source: str, defaults: Outgoing) -> list[Outgoing]:
    """The records of a file of JSON lines (blank lines skipped); a bad line is an error naming it."""
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(_from_line(typing, line, defaults))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source} line {number}: {exc}") from None
    if not out:
        raise ConfigurationError(f"{source} holds no records (one JSON object a line: {', '.join(FILE_FIELDS)})")
    return out


def _from_line(typing: Typing, line: str, defaults: Outgoing) -> Outgoing:
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ConfigurationError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"a JSON object with {', '.join(FILE_FIELDS)} is expected, not {line.strip()!r}")
    unknown = sorted(set(data) - set(FILE_FIELDS))
    if unknown:
        raise ConfigurationError(f"unknown field(s) {', '.join(map(repr, unknown))}; a line has "
                                 f"{', '.join(FILE_FIELDS)}")
    if "value" not in data:
        raise ConfigurationError("no \"value\" (null sends a record without one)")
    headers = list(defaults.headers)
    if "headers" in data:
        headers += _headers(data["headers"])
    timestamp = data.get("timestamp", defaults.timestamp)
    if timestamp is not None and not isinstance(timestamp, (int, float)):
        timestamp = timestamp_seconds(str(timestamp))
    partition = data.get("partition", defaults.partition)
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool) or partition < 0):
        raise ConfigurationError(f"partition {partition!r} is not a partition number")
    key = typed_key(typing, data.get("key", defaults.key))
    value = typed_value(typing, data["value"]) if data["value"] is not None else None
    return checked(typing, Outgoing(key, value, timestamp, headers, partition))


def _headers(value: Any) -> list[tuple[str, bytes]]:
    pairs = value.items() if isinstance(value, dict) else value
    try:
        return [(str(name), item if isinstance(item, bytes) else str(item).encode()) for name, item in pairs]
    except (TypeError, ValueError):
        raise ConfigurationError(f"headers {value!r}: an object {{\"name\": \"value\"}} or a list of "
                                 "[name, value] pairs") from None


async def send_all(topic: Any, records: list[Outgoing], min_latency: float = 0.0,
                   max_latency: float = 0.0) -> list[tuple[int, int]]:
    """Queue every record through the app's one producer (``max_latency``: a random pause
    between sends, as Faust's), then wait for the broker's acknowledgements in order."""
    from ..transport.base import delivery_position

    futures = []
    for i, record in enumerate(records):
        if i and max_latency:
            await asyncio.sleep(random.uniform(min_latency, max_latency))  # nosec B311: pacing, not security
        futures.append(await topic.send(record.key, record.value, headers=record.headers or None,
                                        timestamp=record.timestamp, partition=record.partition))
    return [delivery_position(await fut) for fut in futures]


def report(topic: str, target: str, positions: list[tuple[int, int]]) -> str:
    """What the command prints: where the record went, or how many went where."""
    agent = f" (agent {target.lstrip('@')})" if topic != target else ""
    if len(positions) == 1:
        part, offset = positions[0]
        return f"sent to {topic}{agent} partition {part} offset {offset}"
    spans: dict[int, list[int]] = {}
    for part, offset in positions:
        spans.setdefault(part, []).append(offset)
    where = ", ".join(f"partition {p} offsets {min(o)}-{max(o)}" for p, o in sorted(spans.items()))
    return f"sent {len(positions)} records to {topic}{agent}: {where}"
