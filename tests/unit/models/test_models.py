import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import streamkit as sk
from streamkit.codecs import KeyCodec, RawCodec, StrCodec, codec_for
from streamkit.errors import DecodeError
from streamkit.models.convert import ValidationError


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Item(sk.Record):
    sku: str
    qty: int = 1


class Order(sk.Record):
    id: str
    user: str
    amount: float
    items: list[Item] = dataclasses.field(default_factory=list)
    by_sku: dict[str, Item] = dataclasses.field(default_factory=dict)
    placed: dt.datetime | None = None
    price: Decimal = Decimal("0")
    ref: uuid.UUID | None = None
    color: Color = Color.RED


def test_record_round_trip_with_nested_and_special_types():
    ref = uuid.uuid4()
    order = Order("o1", "alice", 3, items=[Item("a", 2)], by_sku={"b": Item("b")},
                  placed=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc), price=Decimal("9.99"),
                  ref=ref, color=Color.BLUE)
    codec = codec_for(Order)
    back = codec.decode(codec.encode(order))
    assert back == order
    assert isinstance(back.items[0], Item) and isinstance(back.by_sku["b"], Item)
    assert back.price == Decimal("9.99") and back.ref == ref and back.color is Color.BLUE


def test_record_is_slotted_and_typed():
    item = Item("a")
    with pytest.raises(AttributeError):
        item.unknown = 1
    assert Item.loads(b'{"sku": "x", "qty": 5}') == Item("x", 5)
    assert Order.loads(b'{"id":"1","user":"u","amount":2}').amount == 2.0


@pytest.mark.parametrize("payload, fragment", [
    (b'{"id": "1", "user": "u"}', "amount: required field is missing"),
    (b'{"id": 1, "user": "u", "amount": 1}', "Order.id: expected string"),
    (b'{"id": "1", "user": "u", "amount": "x"}', "Order.amount: expected float"),
    (b'{"id": "1", "user": "u", "amount": 1, "items": [{"qty": 1}]}', "sku: required field is missing"),
    (b'{"id": "1", "user": "u", "amount": 1, "color": "green"}', "one of"),
    (b'not json', "invalid JSON"),
])
def test_bad_records_raise_decode_error_naming_the_problem(payload, fragment):
    with pytest.raises(DecodeError, match=fragment):
        codec_for(Order).decode(payload)


def test_plain_dataclass_as_value_type():
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    codec = codec_for(Point)
    assert codec.decode(codec.encode(Point(1, 2))) == Point(1, 2)
    with pytest.raises(DecodeError):
        codec.decode(b'{"x": 1}')


def test_pydantic_model_as_value_type():
    pydantic = pytest.importorskip("pydantic")

    class User(pydantic.BaseModel):
        name: str
        age: int

    codec = codec_for(User)
    assert codec.decode(codec.encode(User(name="a", age=3))) == User(name="a", age=3)
    with pytest.raises(DecodeError):
        codec.decode(b'{"name": "a"}')


def test_simple_codecs():
    assert StrCodec().decode(StrCodec().encode("é")) == "é"
    with pytest.raises(DecodeError):
        StrCodec().decode(b"\xff")
    assert RawCodec().encode(b"x") == b"x"
    assert KeyCodec().encode("k") == b"k" and KeyCodec().encode(5) == b"5"
    assert KeyCodec().decode(b"\xff") == b"\xff"
    assert codec_for(int).decode(b"5") == 5
    with pytest.raises(DecodeError):
        codec_for(int).decode(b'"5"')


@given(st.dictionaries(st.text(), st.one_of(st.integers(-2**60, 2**60), st.text(), st.booleans(), st.none())))
def test_json_codec_round_trips_any_json_object(data):
    codec = codec_for(dict)
    assert codec.decode(codec.encode(data)) == orjson.loads(orjson.dumps(data))


def test_validation_error_is_a_value_error():
    assert issubclass(ValidationError, ValueError)


def test_typed_records_encode_to_the_same_json_as_the_generic_path():
    """Records are encoded by msgspec; the JSON must match orjson's (bar the UTC suffix)."""
    from streamkit.models.record import dumps

    order = Order("o1", "alice", 3.5, items=[Item("a", 2)], by_sku={"b": Item("b")},
                  placed=dt.datetime(2026, 1, 2, 3, 4, 5, 123456), price=Decimal("9.99"),
                  ref=uuid.UUID(int=7), color=Color.BLUE)
    assert orjson.loads(codec_for(Order).encode(order)) == orjson.loads(dumps(order))
    aware = Order("o2", "bob", 1.0, placed=dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc))
    assert codec_for(Order).decode(codec_for(Order).encode(aware)) == aware

    class Odd(sk.Record):
        thing: object

    with pytest.raises(TypeError, match="object"):  # orjson names the type, as before
        codec_for(Odd).encode(Odd(object()))


def test_faust_record_class_options_are_honoured_or_refused_with_the_reason():
    class Order(sk.Record, serializer="json", isodates=True, coerce=True, validation=True, include_metadata=False):
        id: str

    assert Order.loads(b'{"id": "a"}') == Order("a")
    refusals = {
        "serializer": ("avro", "Records are JSON"),
        "validation": (False, "always validates"),
        "decimals": (True, "always encoded as strings"),
        "frozn": (True, "unknown class option"),
    }
    for option, (value, reason) in refusals.items():
        with pytest.raises(TypeError, match=reason) as caught:
            type("Bad", (sk.Record,), {"__annotations__": {"id": str}}, **{option: value})
        assert "Bad(Record" in str(caught.value)


def test_a_union_field_converts_as_the_typed_decoder_does():
    """A Record decodes through msgspec's typed decoder, or, once any polymorphic Record exists
    in the process (a Faust blessed key may then redirect), through ``build_model``. A real
    union (``datetime | float``) was left as the JSON gave it on that second path: an ISO
    string stayed a str where the first path gave a datetime."""
    from streamkit.models.convert import build_model, compile_converter

    when = compile_converter(dt.datetime | float)
    stamp = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert when("2026-01-01T00:00:00+00:00") == stamp and when(1.5) == 1.5
    assert when(3) == 3.0 and type(when(3)) is float  # a number is the float member's, not a timestamp
    with pytest.raises(ValidationError, match="datetime | float"):
        when("not a time")
    with pytest.raises(ValidationError):
        when(True)  # a JSON bool is neither
    either = compile_converter(int | str)
    assert either(3) == 3 and either("3") == "3"  # each JSON kind stays itself
    assert compile_converter(str | dt.datetime)("2026-01-01T00:00:00") == "2026-01-01T00:00:00"  # str wins

    class Tick(sk.Record):
        user: str
        at: dt.datetime | float

    assert build_model(Tick, {"user": "u", "at": "2026-01-01T00:00:00Z"}).at == stamp
    assert codec_for(Tick).decode(b'{"user":"u","at":"2026-01-01T00:00:00Z"}').at == stamp  # the typed path agrees
