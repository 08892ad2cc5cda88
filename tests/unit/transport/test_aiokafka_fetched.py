"""aiokafka's fetched records seen as streamkit messages: every field a ``Message`` has, read
through; a batch's keys and values read in one pass; a decoded batch as from plain messages."""
from aiokafka.structs import ConsumerRecord

from streamkit.codecs import codec_for
from streamkit.runtime.decoding import decode_batch
from streamkit.transport.aiokafka_fetched import as_message, as_messages
from streamkit.transport.base import Message, keys_and_values


def record(offset, key=b"k", value=b'"v"', headers=(), timestamp=1_700_000_000_123):
    return ConsumerRecord("orders", 2, offset, timestamp, 0, key, value, None, 1, 3, headers)


def test_every_message_field_is_the_records():
    fetched = as_messages([record(7, headers=(("reply-to", b"r"),)), record(8, key=None, timestamp=None)], 2)
    first, second = fetched
    assert (first.topic, first.partition, first.offset, first.key, first.value) == ("orders", 2, 7, b"k", b'"v"')
    assert first.headers == [("reply-to", b"r")] and isinstance(first.headers, list)
    assert first.timestamp_ms == 1_700_000_000_123 and first.timestamp == 1_700_000_000.123
    assert second.key is None and second.headers == [] and second.timestamp is None and second.timestamp_ms is None
    assert repr(first) == "<Message orders[2]@7 key=b'k'>"
    assert as_message(record(9)).partition == 2 and as_message(record(9)).offset == 9


def test_a_batchs_keys_and_values_match_each_messages_own():
    fetched = as_messages([record(i, key=None if i == 3 else f"k{i}".encode(), value=f'"{i}"'.encode())
                           for i in range(5)], 2)
    assert keys_and_values(fetched) == ([m.key for m in fetched], [m.value for m in fetched])
    assert keys_and_values(fetched)[0][3] is None


def test_decoding_the_views_matches_decoding_plain_messages():
    records = [record(i, key=f"k{i}".encode(), value=b'{"n": %d}' % i) for i in range(3)] + [record(3, value=b"{")]
    plain = [Message(r.topic, r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in records]
    key_codec, value_codec = codec_for(str, key=True), codec_for(None)
    events, failures = decode_batch(as_messages(records, 2), key_codec, value_codec)
    expected_events, expected_failures = decode_batch(plain, key_codec, value_codec)
    assert [(e.key, e.value, e.offset, e.partition) for e in events] == [
        (e.key, e.value, e.offset, e.partition) for e in expected_events]
    assert [(m.offset, type(exc)) for m, exc in failures] == [(m.offset, type(exc)) for m, exc in expected_failures]
    assert len(failures) == 1 and failures[0][0].offset == 3
