"""Kill -9 chaos run for exactly-once: counts every output, not a belief.

    python -m tests.chaos --broker 127.0.0.1:19092 --driver confluent --records 60000 --kills 20

N inputs with unique sequence numbers (key ``k<i % keys>``) go to a 6-partition topic while 2-3
worker processes sum them per key into a table and emit one output per input. A controller
SIGKILLs a random worker every few seconds and restarts it on the same data directory. At the
end it reads the output topic and the table's changelog with read_committed and prints inputs,
outputs, missing, duplicated and table mismatches; the exit status is non-zero unless all three
are 0.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6


@dataclass
class Summary:
    driver: str
    inputs: int
    outputs: int
    missing: int
    duplicated: int
    mismatches: int
    kills: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.duplicated == 0 and self.mismatches == 0 and self.outputs == self.inputs

    def line(self) -> str:
        return (f"[{self.driver}] chaos: inputs={self.inputs} outputs={self.outputs} missing={self.missing} "
                f"duplicated={self.duplicated} table_mismatches={self.mismatches} kills={self.kills} "
                f"({self.seconds:.0f}s) {'OK' if self.ok else 'FAILED'}")


class Worker:
    """One worker process, restartable on the same data directory (same worker identity)."""

    def __init__(self, index: int, broker: str, driver: str, names: dict[str, str], workdir: Path) -> None:
        self.index = index
        self.data_dir = workdir / f"worker-{index}"
        self.log_path = workdir / f"worker-{index}.log"
        self.env = {**os.environ, "STREAMKIT_BROKER": broker, "STREAMKIT_DRIVER": driver, "PYTHONUNBUFFERED": "1",
                    "CHAOS_APP_ID": names["app"], "CHAOS_IN": names["in"], "CHAOS_OUT": names["out"],
                    "CHAOS_PARTITIONS": str(PARTITIONS)}
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamkit", "worker", "-A", "tests.chaos.app:app", "-l", "info",
                 "--without-web", "--data-dir", str(self.data_dir)],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = 40.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


def create_topics(broker: str, names: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    futures = admin.create_topics([NewTopic(names["in"], PARTITIONS, 1), NewTopic(names["out"], PARTITIONS, 1)])
    for future in futures.values():
        future.result(15)


def feed(broker: str, topic: str, records: int, keys: int, seconds: float, stop: threading.Event) -> None:
    """Produce the inputs spread over ``seconds`` so the kills land while records flow."""
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "partitioner": "murmur2_random",
                         "enable.idempotence": True})
    chunk = 200
    pause = seconds / max(1, records / chunk)
    for i in range(records):
        producer.produce(topic, key=f"k{i % keys}".encode(), value=str(i).encode())
        if i % chunk == chunk - 1:
            producer.poll(0)
            if stop.wait(pause):
                break
    producer.flush(60)


class CommittedReader:
    """Reads a topic from the beginning with read_committed, incrementally."""

    def __init__(self, broker: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": broker, "group.id": f"chaos-reader-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "fetch.queue.backoff.ms": 10})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.records: list = []

    def poll(self, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        got = 0
        while time.monotonic() < deadline:
            batch = [m for m in self.consumer.consume(10000, 0.2) if m.error() is None]
            self.records.extend(batch)
            got += len(batch)
        return got

    def close(self) -> None:
        self.consumer.close()


def run(broker: str, driver: str, *, records: int = 60000, kills: int = 20, workers: int = 3, keys: int = 1000,
        interval: float = 3.0, drain_timeout: float = 180.0, workdir: Path | None = None, seed: int | None = None,
        log=print) -> Summary:
    rng = random.Random(seed)
    unique = uuid.uuid4().hex[:8]
    names = {"app": f"chaos-{unique}", "in": f"chaos-in-{unique}", "out": f"chaos-out-{unique}"}
    workdir = Path(workdir or tempfile.mkdtemp(prefix="streamkit-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    create_topics(broker, names)
    pool = [Worker(i, broker, driver, names, workdir) for i in range(workers)]
    for worker in pool:
        worker.start()
    stop_feed = threading.Event()
    feeder = threading.Thread(target=feed, args=(broker, names["in"], records, keys, max(kills * interval, 5.0),
                                                 stop_feed), daemon=True)
    feeder.start()
    outputs = CommittedReader(broker, names["out"])
    done_kills = 0
    try:
        for _ in range(kills):
            outputs.poll(rng.uniform(0.5 * interval, 1.5 * interval))
            victim = rng.choice(pool)
            victim.kill()
            done_kills += 1
            log(f"  kill {done_kills}/{kills}: worker {victim.index}; committed outputs so far {len(outputs.records)}")
            outputs.poll(rng.uniform(0.2, 1.0))
            victim.start()
        feeder.join(600)
        deadline = time.monotonic() + drain_timeout
        while len(outputs.records) < records and time.monotonic() < deadline:
            outputs.poll(1.0)
        for worker in pool:
            worker.stop()
        outputs.poll(3.0)  # anything the graceful stops committed
    finally:
        stop_feed.set()
        for worker in pool:
            worker.kill()
        outputs.close()
    seen = [int(m.value()) for m in outputs.records]
    unique_seen = set(seen)
    missing = len(set(range(records)) - unique_seen)
    duplicated = len(seen) - len(unique_seen)
    mismatches = table_mismatches(broker, f"{names['app']}-sums-changelog", records, keys)
    return Summary(driver, records, len(seen), missing, duplicated, mismatches, done_kills,
                   time.monotonic() - started)


def table_mismatches(broker: str, changelog: str, records: int, keys: int) -> int:
    """Keys whose committed table value differs from the true sum of their inputs."""
    expected: dict[str, int] = {}
    for i in range(records):
        expected[f"k{i % keys}"] = expected.get(f"k{i % keys}", 0) + i
    reader = CommittedReader(broker, changelog)
    try:
        while reader.poll(2.0):
            pass
        latest = {m.key().decode(): int(m.value()) for m in reader.records}
    finally:
        reader.close()
    return sum(1 for key in expected.keys() | latest.keys() if expected.get(key) != latest.get(key))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True, help="host:port of a broker whose read_committed hides aborts")
    parser.add_argument("--driver", choices=["aiokafka", "confluent"], default="confluent")
    parser.add_argument("--records", type=int, default=60000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--interval", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=None, help="data dirs and worker logs (default: a temp dir)")
    args = parser.parse_args(argv)
    summary = run(args.broker, args.driver, records=args.records, kills=args.kills, workers=args.workers,
                  interval=args.interval, seed=args.seed, workdir=args.workdir)
    print(summary.line())
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
