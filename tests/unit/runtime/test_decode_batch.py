"""A fetched batch is decoded a column at a time (``Codec.decode_many``, C-level loops), and
whatever that returns must be what decoding each record on its own returns, failures and their
errors included: the per-record decode is the reference here."""
from typing import Any

import pytest

import streamkit as sk
from streamkit.codecs import Codec, JsonCodec, KeyCodec, RawCodec, StrCodec
from streamkit.models import blessed
from streamkit.runtime.decoding import decode_batch
from streamkit.transport.base import Message


class Purchase(sk.Record):
    id: int
    user: str
    amount: float


GOOD = [(b"user-%d" % i, b'{"id": %d, "user": "user-%d", "amount": 12.5}' % (i, i)) for i in range(50)]


def fetched(pairs: list[tuple[Any, Any]]) -> list[Message]:
    return [Message("orders", 0, offset, key, value, None, None) for offset, (key, value) in enumerate(pairs)]


def one_by_one(messages: list[Message], key_codec: Codec, value_codec: Codec) -> tuple[list, list]:
    events, failures = [], []
    for message in messages:
        try:
            events.append((key_codec.decode(message.key), value_codec.decode(message.value), message))
        except Exception as exc:
            failures.append((message, f"{type(exc).__name__}: {exc}"))
    return events, failures


def decoded_as_one_by_one(pairs: list[tuple[Any, Any]], key_codec: Codec, value_codec: Codec) -> tuple[list, list]:
    messages = fetched(pairs)
    reference = one_by_one(messages, key_codec, value_codec)
    events, failures = decode_batch(messages, key_codec, value_codec)
    got = ([(e.key, e.value, e.message) for e in events], [(m, f"{type(exc).__name__}: {exc}") for m, exc in failures])
    assert got == reference
    return got


def never_one_by_one(codec: Codec) -> Codec:
    codec.decode = lambda data: pytest.fail("decoded one by one")  # type: ignore[method-assign]
    return codec


@pytest.mark.parametrize("redirects", [set(), {"somewhere.Else"}])
def test_a_good_batch_of_records_is_decoded_without_a_python_call_per_record(monkeypatch, redirects):
    """Also where a Record that allows Faust's blessed key to redirect exists (a process-wide
    registry): values without the blessed key cannot be redirected."""
    monkeypatch.setattr(blessed, "redirect_targets", redirects)
    events, failures = decode_batch(fetched(GOOD), never_one_by_one(StrCodec()), never_one_by_one(JsonCodec(Purchase)))
    assert not failures
    assert [(e.key, e.value) for e in events] == [(f"user-{i}", Purchase(id=i, user=f"user-{i}", amount=12.5))
                                                  for i in range(50)]


def test_untyped_values_a_faust_app_wrote_become_their_records_without_a_call_per_record(monkeypatch):
    monkeypatch.setattr(blessed, "redirect_targets", set())
    encode = JsonCodec(Purchase).encode
    pairs = [(b"user-%d" % i, encode(Purchase(id=i, user=f"user-{i}", amount=1.0))) for i in range(20)]
    events, failures = decode_batch(fetched(pairs + [(b"k", b"[1]")]), KeyCodec(), never_one_by_one(JsonCodec()))
    assert not failures and [e.value for e in events[:20]] == [Purchase(id=i, user=f"user-{i}", amount=1.0)
                                                               for i in range(20)]
    assert events[20].value == [1]


@pytest.mark.parametrize("bad", [b"not json", b'{"id": 1}', b'{"id": "x", "user": "u", "amount": 1}', b"", None])
def test_a_batch_with_one_record_that_does_not_decode_fails_that_record_only(bad):
    pairs = GOOD[:20] + [(b"user-x", bad)] + GOOD[20:]
    events, failures = decoded_as_one_by_one(pairs, StrCodec(), JsonCodec(Purchase))
    assert len(events) + len(failures) == 51
    if bad is None:  # a tombstone decodes to None, as one by one
        assert not failures and events[20][1] is None
    else:
        assert [m.offset for m, _ in failures] == [20]


def test_keys_none_or_not_utf8_decode_as_one_by_one():
    pairs = [(None, GOOD[0][1]), (b"\xff\xfe", GOOD[1][1]), *GOOD[2:10]]
    events, failures = decoded_as_one_by_one(pairs, KeyCodec(), JsonCodec(Purchase))
    assert [e[0] for e in events[:2]] == [None, b"\xff\xfe"] and not failures  # an untyped key stays bytes
    events, failures = decoded_as_one_by_one(pairs, StrCodec(), JsonCodec(Purchase))
    assert [m.offset for m, _ in failures] == [1] and events[0][0] is None  # a str key must be UTF-8
    decoded_as_one_by_one([(None, GOOD[0][1]), *GOOD[1:5]], StrCodec(), RawCodec())


def test_untyped_json_with_and_without_a_faust_blessed_key_decodes_as_one_by_one():
    blessed_value = JsonCodec(Purchase).encode(Purchase(id=7, user="user-7", amount=1.0))
    assert blessed.KEY_BYTES in blessed_value
    events, _ = decoded_as_one_by_one(GOOD[:5], KeyCodec(), JsonCodec())
    assert all(type(e[1]) is dict for e in events)
    events, _ = decoded_as_one_by_one(GOOD[:5] + [(b"user-7", blessed_value)], KeyCodec(), JsonCodec())
    assert type(events[5][1]) is Purchase  # the blessed key names the Record, as in Faust
    decoded_as_one_by_one(GOOD[:5] + [(b"k", b"[1, 2"), (b"k", b"null")], KeyCodec(), JsonCodec())


def test_with_redirect_targets_values_with_the_blessed_key_decode_as_one_by_one(monkeypatch):
    monkeypatch.setattr(blessed, "redirect_targets", {"somewhere.Else"})
    blessed_value = JsonCodec(Purchase).encode(Purchase(id=7, user="user-7", amount=1.0))
    decoded_as_one_by_one(GOOD[:10] + [(b"user-7", blessed_value)], StrCodec(), JsonCodec(Purchase))


def test_a_codec_of_the_users_own_decodes_its_batch_through_its_decode():
    class Upper(Codec):
        def decode(self, data: bytes | None) -> Any:
            if data == b"boom":
                raise ValueError("boom")
            return data.upper() if data else data

    events, failures = decoded_as_one_by_one([(b"a", b"x"), (b"b", b"boom"), (b"c", None)], Upper(), Upper())
    assert [e[1] for e in events] == [b"X", None] and [m.offset for m, _ in failures] == [1]
