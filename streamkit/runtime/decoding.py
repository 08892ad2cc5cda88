"""Fetched records into Events: one definition of decoding a batch, which the worker's router and
Spark's tasks both import (so a record decodes, or fails to, the same way in both)."""
from __future__ import annotations

from typing import Sequence

from ..codecs import Codec
from ..transport.base import Message, keys_and_values
from .event import Event


def decode_batch(messages: Sequence[Message], key_codec: Codec, value_codec: Codec
                 ) -> tuple[list[Event], list[tuple[Message, Exception]]]:
    """Decode a fetched batch into Events; the records that fail come back with their error.
    The worker's router and Spark tasks both decode through this (one definition of a record).
    Keys and values are decoded a column at a time (``Codec.decode_many``: no Python call per
    record); a batch holding a record that does not decode goes record by record instead."""
    if messages:
        keys, values = keys_and_values(messages)
        try:
            return list(map(Event, key_codec.decode_many(keys), value_codec.decode_many(values), messages)), []
        except Exception:  # noqa: BLE001 - which record, and its own error, is found below
            pass
    decode_key, decode_value = key_codec.decode, value_codec.decode
    events: list[Event] = []
    failures: list[tuple[Message, Exception]] = []
    append = events.append
    for message in messages:
        try:
            append(Event(decode_key(message.key), decode_value(message.value), message))
        except Exception as exc:
            failures.append((message, exc))
    return events, failures
