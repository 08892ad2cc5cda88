"""Whether a peer's stateful and windowed outputs are right, not only numerous enough.

A count of output records says nothing about the values: a peer counting per key wrongly, or
emitting a window before it holds all its records, would pass it. So the harness reads the output
topic back and checks the values against what the input implies:

* count per key: per key, the largest count emitted is the state after its last record, so those
  maxima sum to the records the peer consumed, whichever records they were (each key lives in
  one partition; a peer reading a prefix of each partition still counts each key's records once);
* window finals: every emitted (key, window) count equals the input's count of that key's records
  in that window (``ts`` is ascending within each partition, so a window a peer closed on its
  stream time held all its records), and no (key, window) is emitted with two different counts
  (not a final). Windows still open when a peer stopped are not emitted: ``coverage`` says which
  share of the input's windows came out.

Peers that emit updates rather than one value per record (Pathway: a retraction and an insertion
per key per minibatch, each row with ``diff`` -1 or 1) are read by their insertions only; the
same checks hold for them. Rows are ``(key, value)`` with the value decoded from JSON.
"""
from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from typing import Any, Iterable, Iterator

Row = tuple[str, dict[str, Any]]
WINDOW_S = 60


def window_start(ts: float) -> int:
    """The tumbling minute ``ts`` (seconds) falls in, as epoch seconds: every peer aligns to 0."""
    return int(math.floor(ts / WINDOW_S) * WINDOW_S)


def plain_key(key: str) -> str:
    """A key as the input's ``user`` field: streamkit's JSON str keys come quoted (``"user-7"``)."""
    return key[1:-1] if len(key) > 1 and key[0] == key[-1] == '"' else key


def _inserted(rows: Iterable[Row]) -> Iterable[Row]:
    return (row for row in rows if row[1].get("diff", 1) == 1)


def check_counts(rows: Iterable[Row], consumed: int) -> dict[str, Any]:
    """Count per key: the per-key maxima sum to the records consumed."""
    last: dict[str, int] = {}
    for key, value in _inserted(rows):
        user = value.get("user") or plain_key(key)
        last[user] = max(last.get(user, 0), int(value["count"]))
    total = sum(last.values())
    ok = total == consumed
    return {"output_ok": ok, "check": f"counts per key sum to {total:,} of {consumed:,} consumed"
            + ("" if ok else " (WRONG)"), "keys": len(last)}


def _start_seconds(start: float) -> int:
    """Window starts come as epoch ms (Quix, Bytewax) or seconds (faust, Pathway)."""
    return window_start(start / 1000 if start > 1e11 else start)


def check_windows(rows: Iterable[Row], expected: Counter[tuple[str, int]]) -> dict[str, Any]:
    """Window finals: each emitted count is the input's for that key and window, and only one."""
    emitted: dict[tuple[str, int], set[int]] = {}
    for key, value in _inserted(rows):
        user = value.get("user") or plain_key(key)
        emitted.setdefault((user, _start_seconds(float(value["start"]))), set()).add(int(value["value"]))
    wrong_windows = sorted(window for window, counts in emitted.items() if counts != {expected.get(window, 0)})
    wrong = len(wrong_windows)
    not_final = sum(1 for counts in emitted.values() if len(counts) > 1)
    coverage = len(emitted) / len(expected) if expected else 0.0
    ok = bool(emitted) and wrong == 0
    examples = [f"{user} at {start}: {sorted(emitted[(user, start)])} for {expected.get((user, start), 0)}"
                for user, start in wrong_windows[:3]]  # which, to look into: a count alone says too little
    return {"output_ok": ok, "check": f"{len(emitted):,} window finals, {wrong} wrong, {not_final} emitted with "
            f"two counts, {coverage:.0%} of the input's windows" + (f" (e.g. {'; '.join(examples)})" if examples else ""),
            "windows_wrong": wrong, "windows_not_final": not_final, "window_coverage": coverage}


def read_topic(broker: str, topic: str, timeout_s: float = 120.0) -> Iterator[Row]:
    """Every record of ``topic`` (all partitions, start to the end offsets at the call), one at a
    time: an input of a million records is not held at once."""
    import orjson
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"bench-check-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
        wanted = {p: high for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in wanted])
        deadline = time.monotonic() + timeout_s
        while wanted and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error():
                    continue
                yield (msg.key() or b"").decode(), orjson.loads(msg.value())
                if msg.offset() + 1 >= wanted.get(msg.partition(), 0):
                    wanted.pop(msg.partition(), None)
        if wanted:
            raise TimeoutError(f"reading {topic}: partitions {sorted(wanted)} not read to their end in {timeout_s}s")
    finally:
        consumer.close()


def expected_windows(input_rows: Iterable[Row]) -> Counter[tuple[str, int]]:
    """The input's count per (user, minute of ``ts``)."""
    return Counter((value["user"], window_start(value["ts"])) for _key, value in input_rows)


def check_peer_output(kind: str, rows: Iterable[Row], consumed: int,
                      windows: Counter[tuple[str, int]] | None) -> dict[str, Any]:
    """The check for a peer scenario's ``kind`` (``stateful``, ``windowed``), or {} for the
    others (their output count is checked as streamkit's)."""
    if kind == "stateful":
        return check_counts(rows, consumed)
    if kind == "windowed":
        assert windows is not None, "windowed peers are checked against the input's windows"
        return check_windows(rows, windows)
    return {}
