# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""librdkafka's fetched batches cut per partition: order kept, runs of one partition joined,
error events dropped, logged or raised as before."""
from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from streamkit.transport.base import TP
from streamkit.transport.confluent_fetched import FetchedMessage, as_columns, split


def record(topic: str, partition: int, offset: int) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, key=f"k{offset}".encode(),
                   value=f"v{offset}".encode())


def error_event(code: int, fatal: bool = False) -> Message:
    return Message(topic="a", partition=0, offset=-1, error=KafkaError(code, fatal=fatal))


def never(_err: KafkaError) -> bool:
    return False


def offsets(runs: dict[TP, list[Message]]) -> dict[TP, list[int]]:
    return {tp: [m.offset() for m in run] for tp, run in runs.items()}


def test_runs_per_partition_in_fetch_order_and_a_partition_seen_twice_joined():
    raw = [record("a", 0, 1), record("a", 0, 2), record("a", 1, 7), record("b", 0, 3),
           record("a", 0, 3), record("a", 1, 8), record("a", 1, 9)]
    assert offsets(split(raw, never)) == {TP("a", 0): [1, 2, 3], TP("a", 1): [7, 8, 9], TP("b", 0): [3]}


def test_same_partition_number_of_another_topic_is_another_run():
    raw = [record("a", 2, 1), record("b", 2, 1), record("a", 2, 2)]
    assert offsets(split(raw, never)) == {TP("a", 2): [1, 2], TP("b", 2): [1]}


def test_end_of_partition_events_are_dropped_others_logged_and_the_records_kept(caplog):
    raw = [record("a", 0, 1), error_event(KafkaError._PARTITION_EOF), record("a", 0, 2),
           error_event(KafkaError._TRANSPORT), record("a", 1, 5)]
    with caplog.at_level(logging.WARNING, logger="streamkit.confluent"):
        runs = split(raw, never)
    assert offsets(runs) == {TP("a", 0): [1, 2], TP("a", 1): [5]}
    assert [r.getMessage() for r in caplog.records if "consumer:" in r.getMessage()] != []
    assert not any("No more messages" in r.getMessage() for r in caplog.records)


def test_an_error_the_consumer_refuses_is_raised():
    raw = [record("a", 0, 1), error_event(KafkaError.TOPIC_AUTHORIZATION_FAILED)]
    with pytest.raises(KafkaException):
        split(raw, lambda err: err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_empty_fetch():
    assert split([], never) == {}


def test_messages_and_columns_read_every_field():
    raw = [record("a", 0, 4), record("a", 1, 9), record("a", 0, 5)]
    messages = split(raw, never, FetchedMessage)
    assert [(m.topic, m.partition, m.offset, m.key, m.value) for m in messages[TP("a", 0)]] == [
        ("a", 0, 4, b"k4", b"v4"), ("a", 0, 5, b"k5", b"v5")]
    columns = as_columns(split(raw, never))[TP("a", 0)]
    assert (columns.offsets, columns.keys, columns.values) == ([4, 5], [b"k4", b"k5"], [b"v4", b"v5"])
    assert columns.message(1).offset == 5 and columns.message(1).topic == "a"
    assert columns.message(1).partition == 0


def test_a_batchs_keys_and_values_read_in_one_pass_match_each_messages_own():
    from streamkit.transport.base import keys_and_values

    messages = [FetchedMessage.of(record("a", 0, i)) for i in range(5)] + [
        FetchedMessage.of(Message(topic="a", partition=0, offset=5, key=None, value=None))]
    assert keys_and_values(messages) == ([m.key for m in messages], [m.value for m in messages])
    assert keys_and_values(messages)[0][:2] == [b"k0", b"k1"] and keys_and_values(messages)[1][5] is None


def test_a_fetched_message_is_not_tracked_by_the_cyclic_collector():
    """A fetched batch's thousands of views filled the young generation (runtime/gc_tuning.py)
    and cost 0.05 µs a record more to make and free; they hold nothing that refers back."""
    import gc

    messages = split([record("a", 0, 1), record("a", 0, 2)], never, FetchedMessage)[TP("a", 0)]
    assert [gc.is_tracked(m) for m in messages] == [False, False]
    assert messages[1].offset == 2 and messages[1].partition == 0
