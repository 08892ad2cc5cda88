"""Faust's examples run twice on one broker, on the same input: once under faust-streaming 0.15.3
(``import faust``), once under streamkit (``import streamkit as faust``), each started as its
users start it (``python app.py worker -l info``), and their results read back from Kafka.

The examples name their app and topics with literals (``'windowing'``, ``'tumbling_topic'``);
on a shared broker each run renames those literals, the same way on both sides, to names of its
own (``rename``). The input topics are shared by the two sides (the same records), the app ids
and sinks are not (two consumer groups, two changelogs, two outputs). Nothing else of the app
changes: the two copies differ in their imports only.

What each example leaves behind, read the way its side writes it:

- windowed tables (``tumbling.py``, ``hopping.py``): counts per window from the changelog (Faust's
  key is JSON ``[key, [start, end]]``, streamkit's its store key: the formats differ). Faust
  keeps one worker-wide dict (memory store) and writes each update to the record's partition,
  so a window's count is the largest value written for it; streamkit keeps the entry in the
  record's partition (docs/migrating-from-faust.md), so a window's count is the sum of each
  partition's last value;
- ``windowed_aggregation.py``: the aggregates its ``on_window_close`` sends to the sink;
- ``tableofset.py``: each location's set, from the changelog (Faust writes one record per
  ``add``/``discard`` keyed ``[operation, key]``; streamkit the whole set at each checkpoint);
- ``bound_agent.py`` (channels only, no topic): what its log lines say reached each stage.
"""
from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.tables.marks import MARK_KEY
from streamkit.tables.windows import STREAM_TIME_KEY, split_window_key
from tests.faust_apps.faust_env import APPS, as_faust_source, faust_python
from tests.faust_apps.worker import AppWorker
from tests.helpers import wait_until

SIDES = ("faust", "streamkit")
#: Faust's SetTable changelog operations (faust/tables/sets.py)
FAUST_SET_ADD, FAUST_SET_DISCARD, FAUST_SET_UPDATE = 0x1, 0x2, 0xF


def rename(source: str, names: dict[str, str]) -> str:
    """The app's source with each quoted literal in ``names`` replaced (each must be there)."""
    for old, new in names.items():
        quoted = [q for q in ("'", '"') if f"{q}{old}{q}" in source]
        assert quoted, f"{old!r} is not a literal of the app"
        source = source.replace(f"{quoted[0]}{old}{quoted[0]}", repr(new))
    return source


@dataclass
class Side:
    """One side's copy of an example and its worker."""

    name: str
    example: str
    broker: str
    workdir: Path
    names: dict[str, str]
    worker: AppWorker | None = None
    started: list[AppWorker] = field(default_factory=list)

    @property
    def script(self) -> Path:
        return self.workdir / f"{self.example}.py"

    def write(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = APPS / f"{self.example}.py"
        source = as_faust_source(path) if self.name == "faust" else path.read_text()
        self.script.write_text(rename(source, self.names))

    def start(self) -> AppWorker:
        """``python <example>.py worker -l info`` under this side's interpreter, web on loopback."""
        if not self.script.exists():
            self.write()
        python = str(faust_python()) if self.name == "faust" else sys.executable
        self.worker = AppWorker(self.example, self.broker, self.workdir / f"run-{len(self.started)}",
                                script=self.script, python=python, WEB_BIND="127.0.0.1")
        self.started.append(self.worker)
        return self.worker

    def lines(self, needle: str | re.Pattern[str]) -> list[str]:
        """Output lines holding ``needle`` (Faust logs what an app prints, with a log prefix)."""
        assert self.worker is not None
        found = [line for line in list(self.worker.lines)
                 if (needle.search(line) if isinstance(needle, re.Pattern) else needle in line)]
        return found

    def stop(self) -> None:
        """Stop every worker this side started; each must exit 0 without a traceback."""
        for worker in self.started:
            code = worker.stop()
            assert code == 0, f"{self.name}: worker exited {code}:\n{worker.output()[-4000:]}"
            assert "Traceback" not in worker.output(), f"{self.name}:\n{worker.output()[-4000:]}"


def create_topics(broker: str, partitions: dict[str, int]) -> None:
    """The input topics, created before either side starts (Faust does not create a topic it
    only reads or sends to: its docs have the user create it)."""
    admin = AdminClient({"bootstrap.servers": broker})
    for future in admin.create_topics([NewTopic(n, p, 1) for n, p in partitions.items()]).values():
        future.result(30)


def produce(broker: str, topic: str, records: Iterable[dict[str, Any]]) -> int:
    """Send ``records`` (``key``, ``value`` as bytes, ``partition``, ``timestamp`` in ms) and flush."""
    producer = Producer({"bootstrap.servers": broker})
    sent = 0
    for record in records:
        producer.produce(topic, **record)
        sent += 1
    assert producer.flush(30) == 0, "records left unsent"
    return sent


def read(broker: str, topic: str, timeout: float = 30) -> list[Any]:
    """Every record of ``topic`` up to the end offsets it has now (empty partitions included);
    none while it does not exist. Asking the broker about one topic by name would create it
    (``auto.create.topics.enable``) with the broker's default partition count, before the app
    creates it with the source's: Faust then refuses the table (PartitionsMismatch). So the
    whole topic list is asked first. streamkit's checkpoint marks in its changelogs are left out
    (they are not table entries)."""
    listed = AdminClient({"bootstrap.servers": broker}).list_topics(timeout=10).topics
    if topic not in listed:
        return []
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"side-by-side-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    try:
        deadline = time.monotonic() + timeout
        ends = wait_until(lambda: end_offsets(consumer, topic, listed[topic].partitions), timeout,
                          f"{topic}'s partitions to have leaders")
        left = {p: end for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in left])
        records: list[Any] = []
        while left:
            assert time.monotonic() < deadline, f"{topic}: not read to its end offsets {ends} in {timeout}s"
            for m in consumer.consume(10000, 0.2):
                if m.error() is None and m.partition() in left:
                    records.append(m)
                    if m.offset() + 1 >= left[m.partition()]:
                        del left[m.partition()]
    finally:
        consumer.close()
    return [m for m in records if m.key() != MARK_KEY]


def end_offsets(consumer: Consumer, topic: str, partitions: Iterable[int]) -> dict[int, int] | None:
    """{partition: end offset}, or None while a partition has no leader yet (a topic just created)."""
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    except KafkaException as exc:
        if exc.args[0].code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE):
            return None
        raise


def window_counts(side: str, changelog: list[Any]) -> dict[float, int]:
    """{window start: count} from a windowed counting table's changelog (see the module text)."""
    last: dict[tuple[int, float], int] = {}
    faust: dict[float, int] = {}
    for m in changelog:
        if m.value() is None or m.key() == STREAM_TIME_KEY:
            continue
        if side == "faust":  # JSON [key, [start, end]]
            key, window = json.loads(m.key())
            start = float(window[0])
        else:  # streamkit's store key: the key's bytes and the window's start in ms
            raw, start_ms = split_window_key(m.key())
            key, start = raw.decode(), start_ms / 1000
        assert key == "counter", key
        value = json.loads(m.value())
        last[(m.partition(), start)] = value
        faust[start] = max(faust.get(start, 0), value)
    if side == "faust":
        return dict(sorted(faust.items()))
    summed: Counter[float] = Counter()
    for (_partition, start), value in last.items():
        summed[start] += value
    return dict(sorted(summed.items()))


def set_contents(side: str, changelog: list[Any]) -> dict[str, set[str]]:
    """{key: set} from a SetTable's changelog, each side's way (see the module text)."""
    sets: dict[str, set[str]] = {}
    for m in changelog:
        if side == "faust":
            operation, key = json.loads(m.key())
            value = json.loads(m.value())
            members = sets.setdefault(key, set())
            if operation == FAUST_SET_ADD:
                members.add(value)
            elif operation == FAUST_SET_DISCARD:
                members.discard(value)
            else:
                assert operation == FAUST_SET_UPDATE, operation
                added, removed = value
                members |= set(added)
                members -= set(removed)
        else:
            sets[m.key().decode()] = set(json.loads(m.value())) if m.value() is not None else set()
    return {k: v for k, v in sorted(sets.items())}


def settle(read_result: Callable[[], Any], done: Callable[[Any], bool], timeout: float, what: str) -> Any:
    """The result once ``done`` says so and two reads in a row agree (no update half read)."""
    previous: list[Any] = []

    def check() -> Any:
        now = read_result()
        ok = done(now) and previous and previous[-1] == now
        previous[:] = [now]
        return (now,) if ok else None

    try:
        return wait_until(check, timeout, what, interval=0.5)[0]
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; the last read: {previous[-1] if previous else None!r}") from None


def truth_by_window(timestamps: Iterable[float], size: float, step: float) -> dict[float, int]:
    """{window start: records in it} for windows of ``size`` every ``step`` seconds."""
    counts: Counter[float] = Counter()
    for ts in timestamps:
        start = ts - ts % step
        while start > ts - size:
            counts[float(start)] += 1
            start -= step
    return dict(sorted(counts.items()))
