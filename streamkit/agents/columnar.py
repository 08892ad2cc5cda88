"""Columnar agents: ``@app.agent(topic, sink=[out], columnar=True) def fn(batch)`` over a
pyarrow RecordBatch of a fetched batch's records, returning the output rows as a RecordBatch or
Table (or None). One definition for the worker (agents/columnar_body.py) and Spark
(spark/columnar.py), so this module holds what both do: the input schema, the decode of a
batch's bytes straight into Arrow, the retries and bisection of a failing batch, and the
encoding of the output rows. Nothing here awaits.

Input columns: one per field of the topic's Record value type, then ``key``, ``timestamp``
(ms, UTC), ``partition`` and ``offset``. Output: a ``key`` column, if any, is each row's key;
the other columns are the row's fields, encoded by each sink topic's value codec (a JSON object).
"""
from __future__ import annotations

import dataclasses
import keyword
import typing
from operator import attrgetter
from types import UnionType
from typing import TYPE_CHECKING, Any, Callable, Sequence

import msgspec

from ..codecs import RawCodec, StrCodec
from ..errors import ConfigurationError
from .supervision import retried

if TYPE_CHECKING:
    import pyarrow as pa

    from ..topics import Topic

META_COLUMNS = ("key", "timestamp", "partition", "offset")
EXTRA = "pip install 'streamkit[columnar]'"
# one output record, as the sinks take it: (topic, key bytes, value bytes)
Output = tuple[str, "bytes | None", "bytes | None"]
# a record the batch could not take, by its index in the messages given: (index, error)
Failure = tuple[int, BaseException]


_partition_of = attrgetter("partition")


def _pyarrow() -> Any:
    """pyarrow, or the one-line refusal naming the extra that installs it."""
    try:
        import pyarrow
    except ImportError as exc:
        raise ConfigurationError(f"a columnar agent needs pyarrow on every worker: {EXTRA} ({exc})") from None
    return pyarrow


def arrow_type(tp: Any, where: str) -> tuple[Any, bool]:
    """The Arrow type of a field annotation, and whether it may be null."""
    pa = _pyarrow()
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return arrow_type(inner[0], where)[0], True
    scalars = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    if tp in scalars:
        return scalars[tp], False
    if origin is list and len(args) == 1:
        return pa.list_(arrow_type(args[0], where)[0]), False
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return pa.struct(_fields(tp)), False
    raise ConfigurationError(f"{where}: a columnar agent has no Arrow column for {tp!r}; use str, int, float, bool, "
                             "list[...], Optional[...] or a nested Record, or an async agent for this topic")


def _fields(record_type: type) -> list[Any]:
    pa = _pyarrow()
    hints = typing.get_type_hints(record_type)
    fields = []
    for field in dataclasses.fields(record_type):
        data_type, nullable = arrow_type(hints.get(field.name, Any), f"{record_type.__name__}.{field.name}")
        fields.append(pa.field(field.name, data_type, nullable or field.default is None))
    return fields


def _row_type(record_type: type) -> type[msgspec.Struct]:
    """A Struct of the Record's fields that JSON values decode into (one C call a value, no
    dict; 0.36-0.41 µs a record with the columns built, against 0.43-0.47 µs through dicts).
    Scalar fields keep their type, so msgspec checks them as the topic's codec does (a 1.5 for
    an int is refused, where Arrow would truncate it); other fields decode to plain values that
    Arrow converts. Only a default of None is taken: a field with another default is required
    here, so a record that lacks it is decoded by the codec, which fills the default in."""
    hints = typing.get_type_hints(record_type)
    scalars = (str, int, float, bool)
    fields: list[Any] = []
    for field in dataclasses.fields(record_type):
        tp = hints.get(field.name, Any)
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        plain = tp in scalars or (typing.get_origin(tp) in (typing.Union, UnionType) and len(inner) == 1
                                  and inner[0] in scalars)
        row_tp = tp if plain else Any
        fields.append((field.name, row_tp, None) if field.default is None else (field.name, row_tp))
    return msgspec.defstruct(f"{record_type.__name__}Row", fields, kw_only=True, gc=False)


def _key_type(topic: "Topic") -> Any:
    """The ``key`` column's type: the topic's key_type's, else text (the default key codec's)."""
    pa = _pyarrow()
    if topic.key_type is bytes:
        return pa.binary()
    if topic.key_type is None:
        return pa.string()
    return arrow_type(topic.key_type, f"topic {topic.name} key_type")[0]


class Columnar:
    """A columnar agent's function bound to its input topic and sink topics."""

    def __init__(self, name: str, fun: Callable[[Any], Any], topic: "Topic", sinks: Sequence[Any]) -> None:
        import inspect

        self.pa = _pyarrow()
        what = f"columnar agent {name!r}"
        if inspect.iscoroutinefunction(fun) or inspect.isasyncgenfunction(fun):
            raise ConfigurationError(f"{what}: declare it as a plain def fn(batch) returning a pyarrow RecordBatch "
                                     "or Table (or None); async agents iterate records (drop columnar=True)")
        if getattr(topic, "is_channel", False) or len(getattr(topic, "members", (topic,))) != 1 \
                or hasattr(topic, "make_stream"):
            raise ConfigurationError(f"{what}: it reads {topic.name}; a columnar agent reads one topic")
        value_type = topic.value_type
        if not (isinstance(value_type, type) and dataclasses.is_dataclass(value_type)) \
                or topic.value_codec.name != "json":
            raise ConfigurationError(f"{what}: its columns are its topic's Record fields, so it reads a topic whose "
                                     f"value_type is a Record (JSON), not {value_type!r} on {topic.name}: "
                                     f"app.topic({topic.name!r}, value_type=MyRecord)")
        self.name, self.fun, self.topic = name, fun, topic
        self.sinks: list[Topic] = []
        for sink in sinks:
            sink_topic = getattr(sink, "topic", sink) if not hasattr(sink, "value_codec") else sink
            if not hasattr(sink_topic, "value_codec") or getattr(sink_topic, "is_channel", False):
                raise ConfigurationError(f"{what}: sink {sink!r} is not a topic; a columnar agent's rows are encoded "
                                         "by the sink's codecs: sink to a topic (app.topic(...))")
            if sink_topic.value_codec.name != "json":
                raise ConfigurationError(f"{what}: sink {sink_topic.name} takes {sink_topic.value_codec.name} values; "
                                         "a columnar agent writes each row as a JSON object: sink to a topic with a "
                                         "Record value_type, or none")
            self.sinks.append(sink_topic)
        value_fields = _fields(value_type)
        clash = sorted({f.name for f in value_fields} & set(META_COLUMNS))
        if clash:
            raise ConfigurationError(f"{what}: {value_type.__name__} has fields named like the metadata columns "
                                     f"({', '.join(clash)}); rename them, or use an async agent")
        pa = self.pa
        self.value_schema = pa.schema(value_fields)
        self._parse_row = msgspec.json.Decoder(_row_type(value_type)).decode
        self._field_of = [attrgetter(f.name) for f in value_fields]
        self.required = [i for i, f in enumerate(value_fields) if not f.nullable]
        self.schema = pa.schema([*value_fields, pa.field("key", _key_type(topic)),
                                 pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
                                 pa.field("partition", pa.int32()), pa.field("offset", pa.int64())])
        self._rows: dict[tuple[str, ...], type[msgspec.Struct] | None] = {}  # output columns -> a row's Struct

    # -- decode ---------------------------------------------------------------------------------

    def decode(self, messages: Sequence[Any]) -> tuple["pa.RecordBatch", list[int], list[Failure]]:
        """The input batch of ``messages`` (raw records), the indexes of the messages it holds, and
        those that do not decode (each with the topic codecs' own error, as the worker gives it)."""
        from ..transport.base import keys_and_values, stamps_and_offsets

        keys, values = keys_and_values(messages) if messages else ([], [])
        columns = self._columns(values)
        keep: list[int] = list(range(len(messages)))
        failures: list[Failure] = []
        key_column = self._keys(keys) if columns is not None else None
        if columns is None or key_column is None:
            keep, failures, decoded = self._one_by_one(messages, keys, values)
            columns = self.pa.Table.from_pylist(decoded, schema=self.value_schema).columns
            key_column = self.pa.array([self.topic.key_codec.decode(keys[i]) for i in keep], self.schema.field("key").type)
        pa = self.pa
        kept = [messages[i] for i in keep] if failures else messages
        stamps, offsets = stamps_and_offsets(kept) if kept else ([], [])
        meta = [key_column, pa.array(stamps, self.schema.field("timestamp").type),
                pa.array(list(map(_partition_of, kept)), pa.int32()), pa.array(offsets, pa.int64())]
        arrays = [column if isinstance(column, pa.Array) else column.combine_chunks() for column in columns]
        return pa.RecordBatch.from_arrays([*arrays, *meta], schema=self.schema), keep, failures

    def _columns(self, values: list[bytes | None]) -> list[Any] | None:
        """The value columns of the whole batch at once: each value decoded by msgspec into a
        row of the Record's fields (``_row_type``), each field's column built by Arrow. None when
        the batch cannot be taken whole (a null or non-object value, invalid JSON, a wrong type,
        a required field missing): then the records are decoded one by one (``_one_by_one``).

        Not the values joined into one JSON array and decoded in one call (no faster): values
        that are no JSON object alone can join into a valid array of as many objects. Not pyarrow's JSON
        reader: 2.6 µs a record over 100-record batches (its cost per call), 0.55-0.86 µs over
        1,000-5,000, against 0.36-0.41 µs here."""
        if not values:
            return None
        pa, schema = self.pa, self.value_schema
        try:
            rows = list(map(self._parse_row, values))  # type: ignore[arg-type]  # a None raises: one by one then
            columns = [pa.array(list(map(field_of, rows)), field.type)
                       for field_of, field in zip(self._field_of, schema, strict=True)]
        except Exception:  # noqa: BLE001 - which record, and its own error, is found one by one
            return None
        if any(columns[i].null_count for i in self.required):
            return None
        return columns

    def _keys(self, keys: list[bytes | None]) -> Any:
        """The key column; text and bytes keys straight from the bytes by Arrow (its cast to
        string checks the UTF-8, as the str codec's decode does), other keys by the key codec."""
        pa, key_type, codec = self.pa, self.schema.field("key").type, type(self.topic.key_codec)
        try:
            if codec is RawCodec and key_type == pa.binary():
                return pa.array(keys, pa.binary())
            if codec is StrCodec and key_type == pa.string():
                return pa.array(keys, pa.binary()).cast(pa.string())
            return pa.array(self.topic.key_codec.decode_many(keys), key_type)
        except Exception:  # noqa: BLE001 - which key, and its own error, is found one by one
            return None

    def _one_by_one(self, messages: Sequence[Any], keys: list[bytes | None], values: list[bytes | None]
                    ) -> tuple[list[int], list[Failure], list[Any]]:
        """The topic codecs' decode per record (their validation, their errors); values as dicts."""
        key_codec, value_codec = self.topic.key_codec, self.topic.value_codec
        key_type = self.schema.field("key").type
        keep: list[int] = []
        failures: list[Failure] = []
        decoded: list[Any] = []
        for i in range(len(messages)):
            try:
                self.pa.array([key_codec.decode(keys[i])], key_type)
                value = value_codec.decode(values[i])
                if value is None:
                    raise ValueError("a null value (tombstone) has no fields")
                plain = msgspec.to_builtins(value)
                self.pa.Table.from_pylist([plain], schema=self.value_schema)
            except Exception as exc:  # noqa: BLE001 - the record's own error goes to the error policy
                failures.append((i, exc))
                continue
            keep.append(i)
            decoded.append(plain)
        return keep, failures, decoded

    # -- the function ---------------------------------------------------------------------------

    def apply(self, batch: "pa.RecordBatch", *, retries: int, no_retry: tuple[type[BaseException], ...] = (),
              on_failure: Callable[[int, int, BaseException], None] | None = None
              ) -> tuple[list[Output], list[Failure]]:
        """The encoded outputs of ``fn(batch)``. A batch whose function (or encoding) raises is
        tried again ``retries`` times (not for ``no_retry`` errors), then halved until the
        records that fail are single: those come back as failures (row index, error), the other
        halves' outputs go out. ``on_failure(rows, attempt, error)`` hears of each whole-batch failure."""
        attempt = 0
        while True:
            try:
                return self.outputs(self.fun(batch)), []
            except Exception as exc:  # noqa: BLE001 - the user's function: retried, then bisected
                attempt += 1
                if on_failure is not None:
                    on_failure(batch.num_rows, attempt, exc)
                if not retried(exc, no_retry) or attempt > retries:
                    return self._bisect(batch, 0, exc)

    def _bisect(self, batch: "pa.RecordBatch", start: int, exc: BaseException) -> tuple[list[Output], list[Failure]]:
        if batch.num_rows <= 1:
            return [], [(start, exc)]
        half = batch.num_rows // 2
        outputs: list[Output] = []
        failures: list[Failure] = []
        for offset, part in ((0, batch.slice(0, half)), (half, batch.slice(half))):
            try:
                outputs.extend(self.outputs(self.fun(part)))
            except Exception as part_exc:  # noqa: BLE001 - this half holds a failing record
                more_outputs, more_failures = self._bisect(part, start + offset, part_exc)
                outputs.extend(more_outputs)
                failures.extend(more_failures)
        return outputs, failures

    def outputs(self, result: Any) -> list[Output]:
        """The function's result as sink records, row by row, each sink in turn per row."""
        pa = self.pa
        if result is None:
            return []
        if not isinstance(result, (pa.RecordBatch, pa.Table)):
            raise TypeError(f"columnar agent {self.name!r} returned {type(result).__name__}; return a pyarrow "
                            "RecordBatch or Table (or None for no output)")
        names = result.schema.names
        fields = tuple(n for n in names if n != "key")
        values = self._encoded_rows(fields, [result.column(n).to_pylist() for n in fields], result.num_rows)
        if "key" not in names:
            keys: list[Any] = [None] * result.num_rows
        elif len(self.sinks) == 1:
            sink = self.sinks[0]
            key_bytes = self._key_bytes(sink, result.column("key"))
            return list(zip([sink.name] * len(values), key_bytes, values, strict=True))
        else:
            keys = result.column("key").to_pylist()
        if len(self.sinks) == 1:  # the key codec looked up once
            sink = self.sinks[0]
            encode_key, name = sink.key_codec.encode, sink.name
            return [(name, encode_key(k), v) for k, v in zip(keys, values, strict=True)]
        out: list[Output] = []
        for key, value in zip(keys, values, strict=True):
            out.extend((sink.name, sink.key_codec.encode(key), value) for sink in self.sinks)
        return out

    def _key_bytes(self, sink: "Topic", column: Any) -> list[bytes | None]:
        """Each row's key encoded by ``sink``'s key codec; text and bytes keys by Arrow (the
        UTF-8 of a string column is its bytes, what the str codec's encode gives)."""
        pa, codec = self.pa, type(sink.key_codec)
        if codec is StrCodec and column.type in (pa.string(), pa.large_string()):
            keys: list[bytes | None] = column.cast(pa.binary()).to_pylist()
            return keys
        if codec is RawCodec and column.type in (pa.binary(), pa.large_binary()):
            keys = column.to_pylist()
            return keys
        return list(map(sink.key_codec.encode, column.to_pylist()))

    def _encoded_rows(self, fields: tuple[str, ...], columns: list[list[Any]], rows: int) -> list[bytes]:
        """Each row as a JSON object of ``fields`` (what every sink's JSON codec writes for it):
        rows built as msgspec Structs of those fields encode in half the time of dicts."""
        if fields not in self._rows:
            plain = all(f.isidentifier() and not keyword.iskeyword(f) and not f.startswith("_") for f in fields)
            self._rows[fields] = msgspec.defstruct("Row", fields, gc=False) if plain else None  # untracked: 0.03 µs a row
        row: type[msgspec.Struct] | None = self._rows[fields]
        encode = msgspec.json.encode
        if not columns:  # a key column only
            return [b"{}"] * rows
        if row is None:  # names a Struct cannot take: dicts
            return [encode(dict(zip(fields, values, strict=True))) for values in zip(*columns, strict=True)]
        return list(map(encode, map(row, *columns)))
