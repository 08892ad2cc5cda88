# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""The chaos harness's parts: worker processes, the feeder, readers, and the truth to count against."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.tables.marks import MARK_KEY
from streamkit.testing.helpers import END_SETTLE, at_end

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6
STOP_BUDGET = 30.0  # seconds a worker may take to exit after SIGTERM


@dataclass
class Summary:
    """One scenario's counts against the truth, and whether the guarantee held."""

    driver: str
    guarantee: str
    scenario: str
    inputs: int
    outputs: int = 0
    missing: int = 0
    duplicated: int = 0
    table_under: int = 0
    table_over: int = 0
    malformed: int = 0
    dead_lettered: int = 0
    died: int = 0
    slow_stops: int = 0
    faults: int = 0
    windows: int = 0  # --windows: closed windows the truth has, and how the emitted finals differ
    windows_missing: int = 0
    windows_duplicated: int = 0
    windows_under: int = 0
    windows_over: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.guarantee == "exactly_once"

    @property
    def ok(self) -> bool:
        lossless = (self.missing == 0 and self.table_under == 0 and self.died == 0 and self.slow_stops == 0
                    and self.windows_missing == 0 and self.windows_under == 0 and self.windows_over == 0)
        dlq_ok = self.dead_lettered >= self.malformed if not self.exact else self.dead_lettered == self.malformed
        if self.exact:
            return lossless and dlq_ok and self.duplicated == 0 and self.table_over == 0 and self.windows_duplicated == 0
        return lossless and dlq_ok

    def line(self) -> str:
        dlq = f" malformed={self.malformed} dead_lettered={self.dead_lettered}" if self.malformed else ""
        if self.windows:
            dlq += (f" windows={self.windows} missing={self.windows_missing} duplicated={self.windows_duplicated} "
                    f"under={self.windows_under} over={self.windows_over}")
        return (f"[{self.driver}/{self.guarantee}/{self.scenario}] inputs={self.inputs} outputs={self.outputs} "
                f"missing={self.missing} duplicated={self.duplicated} table_under={self.table_under} "
                f"table_over={self.table_over}{dlq} died={self.died} slow_stops={self.slow_stops} "
                f"faults={self.faults} ({self.seconds:.0f}s) {'OK' if self.ok else 'FAILED'}")


class Worker:
    """One worker process, restartable on the same data directory (same worker identity)."""

    def __init__(self, index: int, broker: str, driver: str, guarantee: str, names: dict[str, str],
                 workdir: Path, *, app: str = "tests.chaos.app:app", env: dict[str, str] | None = None) -> None:
        self.index = index
        self.app = app
        self.data_dir = workdir / f"worker-{index}"
        self.log_path = workdir / f"worker-{index}.log"
        self.env = {**os.environ, "STREAMKIT_BROKER": broker, "STREAMKIT_DRIVER": driver, "PYTHONUNBUFFERED": "1",
                    "CHAOS_APP_ID": names["app"], "CHAOS_IN": names["in"], "CHAOS_OUT": names["out"],
                    "CHAOS_PARTITIONS": str(PARTITIONS), "CHAOS_GUARANTEE": guarantee,
                    **({"CHAOS_FINAL": names["final"]} if "final" in names else {}), **(env or {})}
        self.process: subprocess.Popen | None = None
        self.stop_seconds: list[float] = []

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamkit", "worker", "-A", self.app, "-l", "info",
                 "--without-web", "--data-dir", str(self.data_dir)],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def dump(self, timeout: float = 10.0) -> bool:
        """Ask the worker to print its asyncio tasks and threads into its log (a stall's evidence);
        waits until the dump is in the log. False, said in the log, when none came by ``timeout``
        (a loop too stuck to answer is evidence too: the run's failure is reported either way)."""
        if not self.running:
            return False
        assert self.process is not None
        marker = b" thread(s) ---"  # the dump's last section (runtime/diagnostics.py)
        before = self.log_path.read_bytes().count(marker)
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while self.log_path.read_bytes().count(marker) <= before:
            if time.monotonic() > deadline or not self.running:
                with open(self.log_path, "ab") as log:
                    log.write(f"chaos harness: no task dump within {timeout:.0f} s of SIGUSR1\n".encode())
                return False
            time.sleep(0.1)
        return True

    def kill(self) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = STOP_BUDGET + 15) -> int | None:
        """SIGTERM and wait; records how long the exit took (a kill after ``timeout``)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            began = time.monotonic()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.stop_seconds.append(time.monotonic() - began)
        return self.process.returncode


COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                      KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT, KafkaError._TRANSPORT)


def group_lag(broker: str, group: str, topic: str, ends: dict[int, int] | None = None) -> int:
    """Records of ``topic`` the group has not committed yet (end offset minus committed, summed).

    Outputs can all be out while the table is not: at-least-once sends outputs before the
    checkpoint, so a worker killed after sending leaves its table changes to whoever reprocesses
    the records from the committed offsets. Tables are checked once this is 0. ``ends``: each
    partition's end as read (``topic_ends``), where the broker's may be too low (the dev broker).
    A retriable error (NOT_COORDINATOR right after a frozen broker thawed, Kafka 4.1) counts as
    not caught up yet.
    """
    consumer = Consumer({"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        try:
            committed = consumer.committed(tps, timeout=10)
        except KafkaException as exc:  # just after a freeze the coordinator can still be moving
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and (error.retriable() or error.code() in COORDINATOR_MOVING):
                return 1  # not known to be caught up: the callers ask again, up to their deadlines
            raise
        lag = 0
        for tp in committed:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10, cached=False)
            high = max(high, (ends or {}).get(tp.partition, 0))
            lag += max(0, high - max(tp.offset, 0))
        return lag
    finally:
        consumer.close()


def topic_ends(broker: str, topic: str) -> dict[int, int]:
    """Each partition's end as reading it finds (last offset + 1): the dev broker's ListOffsets
    "latest" is the last batch's base offset + 1, too low after a batch of several records, so
    a lag of 0 by it can come while the workers still have records to commit."""
    reader = Reader(broker, topic, committed=False)
    try:
        reader.drain(quiet=1.0)
        ends: dict[int, int] = {}
        for message in reader.records:
            ends[message.partition()] = max(ends.get(message.partition(), 0), message.offset() + 1)
        return ends
    finally:
        reader.close()


def create_topics(broker: str, names: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    futures = admin.create_topics([NewTopic(names[n], PARTITIONS, 1) for n in ("in", "out", "final") if n in names])
    for future in futures.values():
        future.result(15)


def delete_run_topics(broker: str, suffix: str) -> int:
    """Delete every topic whose name holds this run's ``suffix`` (its inputs, outputs and the
    app's changelogs, dead letters and internal topics); returns how many. A passed run's topics
    are of no further use, and the broker's data directory otherwise grows by a dozen topics a
    run until restarts take minutes and the broker runs out of file handles."""
    admin = AdminClient({"bootstrap.servers": broker})
    names = [name for name in admin.list_topics(timeout=30).topics if suffix in name]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            future.result(60)
    return len(names)


def feed(broker: str, topic: str, records: int, keys: int, seconds: float, stop: threading.Event,
         malformed_every: int = 0) -> int:
    """Produce the inputs spread over ``seconds`` so faults land while records flow; the producer
    retries through broker outages (no delivery timeout). With ``malformed_every``, a record
    that is not JSON (``bad-<n>``) follows every that many good ones. Returns malformed sent."""
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "partitioner": "murmur2_random",
                         "enable.idempotence": True, "message.timeout.ms": 0})
    chunk = 200
    pause = seconds / max(1, records / chunk)
    bad = 0
    for i in range(records):
        producer.produce(topic, key=f"k{i % keys}".encode(), value=str(i).encode())
        if malformed_every and i % malformed_every == malformed_every - 1:
            producer.produce(topic, key=f"k{i % keys}".encode(), value=f"bad-{bad}".encode())
            bad += 1
        if i % chunk == chunk - 1:
            producer.poll(0)
            if stop.wait(pause):
                break
    left = producer.flush(900)
    if left:
        raise RuntimeError(f"the feeder could not deliver {left} inputs")
    return bad


class Reader:
    """Reads a topic from the beginning, incrementally (read_committed for exactly-once)."""

    def __init__(self, broker: str, topic: str, *, committed: bool = True) -> None:
        self.consumer = Consumer({"bootstrap.servers": broker, "group.id": f"chaos-reader-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
        # A topic created a moment ago can be listed without partitions yet (its leader is still
        # being elected): assigning those would read nothing and count every output as missing.
        deadline = time.monotonic() + 30
        while True:
            meta = self.consumer.list_topics(topic, timeout=30)
            partitions = sorted(meta.topics[topic].partitions) if topic in meta.topics else []
            if len(partitions) >= PARTITIONS:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic!r} has {len(partitions)} partitions in the metadata after 30 s")
            time.sleep(0.2)
        self.consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        self.records: list = []

    def poll(self, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        got = 0
        while time.monotonic() < deadline:
            batch = [m for m in self.consumer.consume(10000, 0.2) if m.error() is None]
            self.records.extend(batch)
            got += len(batch)
        return got

    def drain(self, quiet: float = 3.0, limit: float = 120.0) -> None:
        """Read what is left once nothing writes any more: until every partition reached the end
        its last fetch reported and a whole fetch cycle (1 s) brought nothing new, or nothing
        new for ``quiet`` seconds (the end a read_committed reader waits for may stay open)."""
        deadline = time.monotonic() + limit
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            if self.poll(0.2):
                last_new = time.monotonic()
                continue
            idle = time.monotonic() - last_new
            if idle >= quiet or (idle >= END_SETTLE and at_end(self.consumer)):
                return

    def close(self) -> None:
        self.consumer.close()


def table_errors(broker: str, changelog: str, records: int, keys: int, *, committed: bool) -> tuple[int, int]:
    """(keys under their true sum, keys over it) in the table's changelog, latest value per key."""
    expected: dict[str, int] = {}
    for i in range(records):
        expected[f"k{i % keys}"] = expected.get(f"k{i % keys}", 0) + i
    reader = Reader(broker, changelog, committed=committed)
    try:
        reader.drain()
        latest = {m.key().decode(): int(m.value()) for m in reader.records
                  if m.value() is not None and m.key() != MARK_KEY}  # checkpoint marks: tables/marks.py
    finally:
        reader.close()
    under = sum(1 for key, want in expected.items() if latest.get(key, 0) < want)
    over = sum(1 for key in expected.keys() | latest.keys() if latest.get(key, 0) > expected.get(key, 0))
    return under, over


WINDOW_SECONDS = 60  # tests/chaos/app.py: per-minute windows, event time = sequence number / 100 s


def window_truth(records: int, keys: int) -> dict[tuple[str, float], int]:
    """Each window that must have closed: its stream time (its partition's largest event time)
    reached its end. Every key's inputs arrive in sequence order, so none is late."""
    from streamkit.transport.partitioner import partition_for_key

    counts: dict[tuple[str, float], int] = {}
    high: dict[int, int] = {}
    for i in range(records):
        key = f"k{i % keys}"
        number = partition_for_key(key.encode(), PARTITIONS)
        high[number] = max(high.get(number, 0), i * 10)  # event time in ms
        start = float((i // 100) // WINDOW_SECONDS * WINDOW_SECONDS)
        counts[(key, start)] = counts.get((key, start), 0) + 1
    return {(key, start): n for (key, start), n in counts.items()
            if (start + WINDOW_SECONDS) * 1000 <= high[partition_for_key(key.encode(), PARTITIONS)]}


def window_errors(broker: str, topic: str, records: int, keys: int, *, committed: bool) -> tuple[int, ...]:
    """(windows, missing, duplicated, under, over) of the final values emitted to ``topic``."""
    import orjson

    truth = window_truth(records, keys)
    reader = Reader(broker, topic, committed=committed)
    try:
        reader.drain()
        emitted = [(m.key().decode(), orjson.loads(m.value())) for m in reader.records if m.value() is not None]
    finally:
        reader.close()
    seen: dict[tuple[str, float], int] = {}
    duplicated = under = over = 0
    for key, final in emitted:
        window = (key, float(final["start"]))
        if window in seen:
            duplicated += 1
        seen[window] = final["value"]
        want = truth.get(window)
        if want is not None and final["value"] < want:
            under += 1
        elif want is None or final["value"] > want:
            over += 1
    return len(truth), len(truth.keys() - seen.keys()), duplicated, under, over


KEPT = Path(__file__).resolve().parents[2] / "chaos-failures"


def kept(summary, workdir: Path) -> str:
    """A failed run's worker logs, copied where pytest's temp-dir pruning cannot remove them."""
    if summary.ok:
        return ""
    target = KEPT / workdir.name
    target.mkdir(parents=True, exist_ok=True)
    for log in workdir.glob("*.log"):  # not the workers' data directories
        shutil.copy2(log, target / log.name)
    explained = "".join(f"\n{note}" for note in summary.notes)  # which outputs, who wrote them (explain.py)
    return f" (worker logs kept in {target}){explained}"


def sigkill_rounds(pool: list["Worker"], kills: int, rng, interval: float, poll, progress, log=print) -> int:
    """SIGKILL a random worker of ``pool`` ``kills`` times, ``interval`` seconds apart on
    average, restarting it after a short pause; ``poll(seconds)`` reads outputs meanwhile and
    ``progress()`` says how far they got. Returns how many kills were made."""
    done = 0
    for _ in range(kills):
        poll(rng.uniform(0.5 * interval, 1.5 * interval))
        victim = rng.choice(pool)
        victim.kill()
        done += 1
        log(f"  kill {done}/{kills}: worker {victim.index}; {progress()}")
        poll(rng.uniform(0.2, 1.0))
        victim.start()
    return done
