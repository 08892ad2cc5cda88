"""``streamkit worker --processes 2`` on a broker: both members join and split the input, a key's
table value answers through either member's port, SIGTERM stops them all (exit 0), and a member
killed makes the supervisor name it and stop the other (exit 128 + 9)."""
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.devbroker import free_port
from streamkit.transport.partitioner import partition_for_key
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
KEYS = 200
RECORDS = 2_000


class Supervised:
    """``streamkit worker -A tests.apps.counter:app --processes 2`` and its log."""

    def __init__(self, broker, driver, unique, tmp_path):
        self.port = next(p for p in (free_port() for _ in range(50)) if bindable(p + 1))  # both members' ports
        self.data_dir = tmp_path / "data"
        self.log_path = tmp_path / "supervisor.log"
        env = {**os.environ, "STREAMKIT_BROKER": broker, "STREAMKIT_DRIVER": driver,
               "COUNTER_APP_ID": f"sup-{unique}", "COUNTER_IN": f"sup-in-{unique}", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.counter:app", "-l", "info",
             "--processes", "2", "--web-port", str(self.port), "--data-dir", str(self.data_dir)],
            cwd=ROOT, env=env, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT)

    def log(self):
        return self.log_path.read_text()

    def pids(self):
        lines = [line for line in self.log().splitlines() if "started member" in line]
        return [int(line.split("pid ")[1].split()[0].rstrip(",)")) for line in lines] if len(lines) == 2 else None

    def get(self, member, path):
        """``path`` on member 0 or 1's web port: (status, JSON), (None, None) while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port + member}{path}", timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None, None

    def split(self):
        """Each member's table partitions once both are ready and own some, together all four."""
        if self.process.poll() is not None:
            raise AssertionError(f"supervisor exited {self.process.returncode}: {self.log()[-3000:]}")
        owned = []
        for member in (0, 1):
            ready, _ = self.get(member, "/ready")
            status, tables = self.get(member, "/tables")
            if (ready, status) != (200, 200):
                return None
            owned.append(set(tables["counts"]["local_partitions"]))
        return owned if all(owned) and owned[0] | owned[1] == {0, 1, 2, 3} and not owned[0] & owned[1] else None

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        for pid in self.pids() or []:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def bindable(port):
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def alive(pid):
    """The process runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.fixture
def supervised(broker_address, driver, unique, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker_address})
    admin.create_topics([NewTopic(f"sup-in-{unique}", 4, 1)])[f"sup-in-{unique}"].result(15)
    started = Supervised(broker_address, driver, unique, tmp_path)
    yield started
    started.stop()


def produce(broker, unique):
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "partitioner": "murmur2_random"})
    for i in range(RECORDS):
        producer.produce(f"sup-in-{unique}", key=f"k{i % KEYS}".encode(), value=str(i).encode())
    producer.flush(30)


def test_two_members_split_the_input_and_answer_for_each_other(broker_address, unique, supervised):
    owned = wait_until(supervised.split, 120, "both members ready, splitting the table's four partitions")
    produce(broker_address, unique)

    def counted():
        dumps = [supervised.get(member, "/dump") for member in (0, 1)]
        if any(status != 200 for status, _ in dumps):
            return None
        merged = Counter()
        for _, dump in dumps:
            merged.update(dump)
        return merged if sum(merged.values()) >= RECORDS else None

    merged = wait_until(counted, 90, "every record counted by one member or the other")
    assert merged == Counter({f"k{i}": RECORDS // KEYS for i in range(KEYS)})  # every record, once
    text = supervised.log()
    assert "[w1]" in text and "[w2]" in text and "owns now:" in text
    for owner in (0, 1):  # a key owned by one member, asked of the other's port: routed
        key = next(f"k{i}" for i in range(KEYS) if partition_for_key(f"k{i}".encode(), 4) in owned[owner])
        assert supervised.get(1 - owner, f"/count/{key}") == (200, {"key": key, "count": RECORDS // KEYS})
    data = sorted(p.name for p in supervised.data_dir.iterdir())
    assert data == ["w1", "w2"], data


def test_sigterm_stops_every_member_and_exits_0(supervised):
    wait_until(supervised.split, 120, "both members ready")
    pids = supervised.pids()
    assert pids and all(alive(pid) for pid in pids)
    supervised.process.send_signal(signal.SIGTERM)
    code = supervised.process.wait(60)
    assert code == 0, supervised.log()[-3000:]
    assert not [pid for pid in pids if alive(pid)], "a member outlived the supervisor"
    text = supervised.log()
    assert text.count("signal received: finishing in-flight records") == 2, text[-3000:]


def test_a_killed_member_is_named_and_stops_the_other(supervised):
    wait_until(supervised.split, 120, "both members ready")
    pids = supervised.pids()
    os.kill(pids[1], signal.SIGKILL)
    code = supervised.process.wait(60)
    text = supervised.log()
    assert code == 128 + signal.SIGKILL, text[-3000:]
    named = [line for line in text.splitlines() if "member w2" in line and "SIGKILL" in line]
    assert len(named) == 1, text[-3000:]
    assert not alive(pids[0]), "w1 still runs after w2 was killed"
