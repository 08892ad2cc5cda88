"""Faust's ``__faust`` blessed key: streamkit reads what Faust writes and writes what Faust reads.

``FAUST_BYTES`` is the exact output of faust-streaming 0.15.3 for ``DRAWING`` below (generated
with ``Drawing.dumps(serializer="json")``); tests/integration/test_faust_interop.py checks the same
against a live Faust in both directions.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import orjson
import pytest

import streamkit as faust
from streamkit.codecs import codec_for
from streamkit.errors import DecodeError


class Shape(faust.Record, abstract=True, polymorphic_fields=True, namespace="geo.Shape"):
    name: str


class Circle(Shape, namespace="geo.Circle"):
    r: float


class Square(Shape, namespace="geo.Square"):
    side: float


class Drawing(faust.Record, namespace="geo.Drawing", isodates=True, coerce=True):
    shapes: list[Shape]
    main: Shape
    at: datetime
    price: Decimal


class Point(faust.Record):
    x: int
    y: int


class Bare(faust.Record, include_metadata=False):
    x: int


class Nothing(faust.Record):
    pass


FAUST_BYTES = (b'{"shapes":[{"name":"c","r":1.5,"__faust":{"ns":"geo.Circle"}},{"name":"s","side":2.0,"__faust":'
               b'{"ns":"geo.Square"}}],"main":{"name":"m","side":3.0,"__faust":{"ns":"geo.Square"}},'
               b'"at":"2026-01-02T03:04:05","price":"9.99","__faust":{"ns":"geo.Drawing"}}')
DRAWING = Drawing(shapes=[Circle(name="c", r=1.5), Square(name="s", side=2.0)], main=Square(name="m", side=3.0),
                  at=datetime(2026, 1, 2, 3, 4, 5), price=Decimal("9.99"))


@pytest.mark.parametrize("value_type", [Drawing, None], ids=["declared", "untyped"])
def test_faust_written_polymorphic_records_decode_into_their_classes(value_type):
    decoded = codec_for(value_type).decode(FAUST_BYTES)
    assert decoded == DRAWING
    assert [type(s) for s in decoded.shapes] == [Circle, Square] and type(decoded.main) is Square


def test_streamkit_writes_the_json_faust_writes():
    for encode in (
        codec_for(Drawing).encode,
        faust.Record.dumps,
        lambda r: orjson.dumps(r.to_representation(), default=str),
    ):
        assert orjson.loads(encode(DRAWING)) == orjson.loads(FAUST_BYTES)
    assert Drawing.loads(DRAWING.dumps()) == DRAWING


def test_flat_records_get_the_key_spliced_and_include_metadata_false_leaves_it_out():
    point_ns = f"{__name__}.Point"
    assert orjson.loads(codec_for(Point).encode(Point(1, 2))) == {"x": 1, "y": 2, "__faust": {"ns": point_ns}}
    assert orjson.loads(codec_for(Nothing).encode(Nothing())) == {"__faust": {"ns": f"{__name__}.Nothing"}}
    assert codec_for(Bare).encode(Bare(1)) == b'{"x":1}'
    assert Point(1, 2).asdict() == {"x": 1, "y": 2} and Point._options.namespace == point_ns


def test_a_concrete_declared_type_ignores_a_key_naming_a_class_that_does_not_allow_it():
    # Point does not allow blessed keys: another class's namespace is ignored, as in Faust
    data = b'{"x": 1, "y": 2, "__faust": {"ns": "geo.Drawing"}}'
    assert codec_for(Point).decode(data) == Point(1, 2)
    # a namespace no class declares is ignored under a concrete type, refused when none is declared
    unknown = b'{"x": 1, "y": 2, "__faust": {"ns": "elsewhere.Point"}}'
    assert codec_for(Point).decode(unknown) == Point(1, 2)
    with pytest.raises(DecodeError, match="'elsewhere.Point'.*import the module"):
        codec_for(None).decode(unknown)
    # a polymorphic class is chosen even under another declared type (Faust's rule)
    assert type(codec_for(Point).decode(b'{"name": "c", "r": 1, "__faust": {"ns": "geo.Circle"}}')) is Circle


def test_abstract_records_cannot_be_built_and_need_a_blessed_key():
    with pytest.raises(NotImplementedError, match="abstract"):
        Shape(name="x")
    assert codec_for(Shape).decode(b'{"name": "c", "r": 2, "__faust": {"ns": "geo.Circle"}}') == Circle("c", 2.0)
    with pytest.raises(DecodeError):
        codec_for(Shape).decode(b'{"name": "c", "r": 2}')


def test_a_namespace_belongs_to_one_class():
    with pytest.raises(TypeError, match="'geo.Circle' is taken.*own namespace="):

        class Other(faust.Record, namespace="geo.Circle"):
            r: float


def test_faust_record_api():
    assert Point(1, 2).validate() == [] and Point(1, 2).is_valid()
    errors = Point(1, "two").validate()
    assert len(errors) == 1 and "Point.y" in str(errors[0]) and not Point(1, "two").is_valid()
    assert Point(1, 2).derive(Point(5, 6), y=9) == Point(5, 9)
    assert Point.from_data({"x": 1, "y": 2}) == Point(1, 2)
    assert type(faust.Record.from_data({"name": "c", "r": 2, "__faust": {"ns": "geo.Circle"}})) is Circle
    with pytest.raises(ValueError, match="Records are JSON"):
        Point.loads(b"{}", serializer="avro")
