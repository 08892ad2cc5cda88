"""Tables across worker processes on a broker: crash recovery, tail-only restart, routed queries."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.devbroker import free_port
from streamkit.tables.marks import MARK_KEY
from streamkit.testing import read_topic
from streamkit.transport.partitioner import partition_for_key
from tests.helpers import committed_total, restored_state, wait_until

ROOT = Path(__file__).resolve().parents[2]
KEYS = 1000


class Worker:
    def __init__(self, broker, driver, unique, tmp_path, name, **env):
        self.port = free_port()
        self.log_path = tmp_path / f"{name}.log"
        self.data_dir = tmp_path / f"data-{env.pop('data', name)}"
        full_env = {**os.environ, "STREAMKIT_BROKER": broker, "STREAMKIT_DRIVER": driver,
                    "COUNTER_APP_ID": f"tbl-{unique}", "COUNTER_IN": f"tbl-in-{unique}", "PYTHONUNBUFFERED": "1",
                    **env}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.counter:app", "-l", "info",
             "--web-port", str(self.port), "--data-dir", str(self.data_dir)],
            cwd=ROOT, env=full_env, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT)

    def get(self, path, timeout=10):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None, None

    def wait_ready(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited {self.process.returncode}: {self.log()[-3000:]}")
            status, _ = self.get("/ready", timeout=2)
            if status == 200:
                return
            time.sleep(0.2)
        raise TimeoutError(f"worker not ready after {timeout}s: {self.log()[-3000:]}")

    def log(self):
        return self.log_path.read_text()

    def replayed(self):
        return sum(int(n) for n in re.findall(r"recovered (\d+) changelog records", self.log()))

    def counted(self):
        """The sum of the worker's counts (0 while it does not answer)."""
        status, dump = self.get("/dump")
        return sum(dump.values()) if status == 200 else 0

    def count_of(self, key):
        """``/count/{key}`` as this worker answers it (routed to the owner), None on an error."""
        status, body = self.get(f"/count/{key}")
        return body["count"] if status == 200 else None

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


@pytest.fixture
def workers():
    started = []
    yield started
    for w in started:
        w.stop(signal.SIGKILL)


def create_input(broker, unique, partitions=4):
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(f"tbl-in-{unique}", partitions, 1)])[f"tbl-in-{unique}"].result(15)


def produce(broker, unique, n, start=0, rate=None):
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "partitioner": "murmur2_random"})
    for i in range(start, start + n):
        producer.produce(f"tbl-in-{unique}", key=f"k{i % KEYS}".encode(), value=str(i).encode())
        if rate and i % 500 == 499:
            producer.poll(0)
            time.sleep(500 / rate)
    producer.flush(30)


def committed(broker, unique):
    """Input records the group has checkpointed (their counts are in the changelog)."""
    return committed_total(broker, f"tbl-{unique}", f"tbl-in-{unique}", 4)


def changelog_state(broker, unique):
    latest = {}
    for m in read_topic(broker, f"tbl-{unique}-counts-changelog", timeout=60, to_end=True):
        if m.key() != MARK_KEY:  # checkpoint marks (tables/marks.py)
            latest[m.key().decode()] = int(m.value())
    return latest


def test_sigkill_mid_way_then_restart_recovers_the_changelog(broker_address, driver, unique, workers, tmp_path):
    total = 50_000
    create_input(broker_address, unique)
    first = Worker(broker_address, driver, unique, tmp_path, "first")
    workers.append(first)
    first.wait_ready()
    feeder = threading.Thread(target=produce, args=(broker_address, unique, total, 0, 10_000))
    feeder.start()
    # kill once a good part (but not all) was counted
    wait_until(lambda: first.counted() >= total // 3, 60, "a third of the records counted")
    first.stop(signal.SIGKILL)
    feeder.join(60)
    in_changelog = restored_state(broker_address, f"tbl-{unique}-counts-changelog", f"tbl-{unique}",
                                  f"tbl-in-{unique}", 4)  # checkpoint blocks the group committed
    assert 0 < sum(in_changelog.values()) < total

    # Fresh data dir: everything comes from the changelog. The agent holds until released.
    second = Worker(broker_address, driver, unique, tmp_path, "second", COUNTER_HOLD="1")
    workers.append(second)
    second.wait_ready()
    status, recovered = second.get("/dump")
    assert status == 200 and recovered == in_changelog
    print(f"\n[{driver}] SIGKILL recovery: changelog keys={len(in_changelog)} "
          f"counted before kill={sum(in_changelog.values())} replayed={second.replayed()}")
    second.get("/release")
    wait_until(lambda: second.counted() >= total, 120, "every record counted after the restart")
    status, final = second.get("/dump")
    assert status == 200
    true_counts = Counter(f"k{i % KEYS}" for i in range(total))
    assert set(final) == set(true_counts)
    assert final == true_counts  # at-least-once, and the table restored to the committed state: exact
    print(f"[{driver}] final total={sum(final.values())} true total={total}")


def test_restart_with_intact_rocksdb_replays_only_the_tail(broker_address, driver, unique, workers, tmp_path):
    create_input(broker_address, unique)
    produce(broker_address, unique, 20_000)
    first = Worker(broker_address, driver, unique, tmp_path, "first", data="shared")
    workers.append(first)
    first.wait_ready()
    wait_until(lambda: first.counted() == 20_000, 90, "20,000 records counted")
    wait_until(lambda: committed(broker_address, unique) == 20_000, 30, "a checkpoint after the last record")
    assert first.stop() == 0
    total_changelog = len(read_topic(broker_address, f"tbl-{unique}-counts-changelog", timeout=60, to_end=True))
    produce(broker_address, unique, 1_000, start=20_000)
    second = Worker(broker_address, driver, unique, tmp_path, "second", data="shared")
    workers.append(second)
    second.wait_ready()
    wait_until(lambda: second.counted() == 21_000, 60, "21,000 records counted after the restart")
    status, dump = second.get("/dump")
    assert status == 200 and sum(dump.values()) == 21_000 and all(v == 21 for v in dump.values())
    # the recovery's summary line comes once every partition is replayed: absent, replayed() reads 0
    wait_until(lambda: "changelog records for" in second.log(), 30, "the restart's recovery summary")
    replayed = second.replayed()
    print(f"\n[{driver}] restart with intact RocksDB: changelog records={total_changelog} replayed={replayed}")
    assert replayed < total_changelog / 10


def test_queries_route_to_the_owner_and_follow_a_failover(broker_address, driver, unique, workers, tmp_path):
    create_input(broker_address, unique)
    produce(broker_address, unique, 4_000)
    a = Worker(broker_address, driver, unique, tmp_path, "a")
    b = Worker(broker_address, driver, unique, tmp_path, "b")
    workers += [a, b]

    def split():
        """Both ready, each owning some of the table's partitions, together all of them."""
        sa, ta = a.get("/tables")
        sb, tb = b.get("/tables")
        ra, _ = a.get("/ready")
        rb, _ = b.get("/ready")
        if (sa, sb, ra, rb) != (200, 200, 200, 200):
            return None
        owned = {"a": set(ta["counts"]["local_partitions"]), "b": set(tb["counts"]["local_partitions"])}
        return owned if owned["a"] and owned["b"] and owned["a"] | owned["b"] == {0, 1, 2, 3} else None

    owned = wait_until(split, 90, "a and b split the table's partitions")
    assert not owned["a"] & owned["b"], owned
    key = next(f"k{i}" for i in range(KEYS) if partition_for_key(f"k{i}".encode(), 4) in owned["b"])
    wait_until(lambda: a.count_of(key) == 4, 60, f"a answers {key}'s count (from b)")
    assert a.get(f"/count/{key}") == (200, {"key": key, "count": 4})  # answered by b, through a
    status, body = a.get(f"/tables/counts/{key}")
    assert (status, body) == (200, {"key": key, "value": 4})
    # Every input is checkpointed: b's counts are in its changelog partitions.
    wait_until(lambda: committed(broker_address, unique) == 4_000, 30, "a checkpoint after the last record")
    recoveries_before = a.log().count("changelog records for")
    b.stop(signal.SIGKILL)
    wait_until(lambda: a.count_of(key) == 4, 90, f"a took over {key}'s partition")
    assert a.get(f"/count/{key}") == (200, {"key": key, "count": 4})  # a took b's partition over
    # a ran a recovery for the partitions it took over (replaying whatever its store lacked:
    # everything if it never owned them, only b's tail if it did before the first rebalance).
    # A partition serves once its own changelog is replayed; the recovery's summary line comes
    # when every partition of it is, so it may follow the answer above.
    wait_until(lambda: a.log().count("changelog records for") > recoveries_before, 30,
               "a's recovery of the partitions it took over")
    _, tables = a.get("/tables")
    assert set(tables["counts"]["local_partitions"]) == {0, 1, 2, 3}
