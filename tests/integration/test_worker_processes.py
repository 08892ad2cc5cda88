"""Worker processes: group split, SIGKILL failover (at-least-once), SIGTERM commit and restart."""
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamkit.testing import read_topic

ROOT = Path(__file__).resolve().parents[2]


def start_worker(broker, driver, unique, log_path, **extra_env):
    env = {**os.environ, "STREAMKIT_WEB_ENABLED": "false", **extra_env, "STREAMKIT_BROKER": broker, "STREAMKIT_DRIVER": driver, "PIPE_APP_ID": f"proc-{unique}",
           "PIPE_IN": f"proc-in-{unique}", "PIPE_OUT": f"proc-out-{unique}", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.pipeline:app", "-l", "info"],
                            cwd=ROOT, env=env, stdout=open(log_path, "ab"), stderr=subprocess.STDOUT)


def create_topics(broker, unique, partitions=6):
    admin = AdminClient({"bootstrap.servers": broker})
    futures = admin.create_topics([NewTopic(f"proc-{kind}-{unique}", partitions, 1) for kind in ("in", "out")])
    for fut in futures.values():
        fut.result(15)


def produce(broker, topic, values, rate=None):
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "partitioner": "murmur2_random"})
    for n, value in enumerate(values):
        producer.produce(topic, key=str(value).encode(), value=str(value).encode())
        if rate and n % 100 == 99:
            producer.poll(0)
            time.sleep(100 / rate)
    producer.flush(30)


def output_values(broker, unique, expect, timeout):
    records = read_topic(broker, f"proc-out-{unique}", expect=expect, timeout=timeout)
    return Counter(int(m.value()) for m in records)


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting until {what}")
        time.sleep(0.1)


def wait_exit(process, timeout):
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
        return None


@pytest.fixture
def workers():
    started = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_sigkill_one_of_two_workers_loses_nothing(broker_address, driver, unique, workers, tmp_path):
    create_topics(broker_address, unique)
    total = 6000
    a = start_worker(broker_address, driver, unique, tmp_path / "a.log")
    b = start_worker(broker_address, driver, unique, tmp_path / "b.log")
    workers += [a, b]
    wait_until(lambda: all("assigned" in (tmp_path / f"{w}.log").read_text() for w in "ab"), 60, "both workers joined")
    b_assignments = (tmp_path / "b.log").read_text().count("assigned")
    feeder = threading.Thread(target=produce, args=(broker_address, f"proc-in-{unique}", range(total), 300))
    feeder.start()
    time.sleep(6)  # both processing while input still flows (the feed takes ~20 s)
    a_assigned = [line for line in (tmp_path / "a.log").read_text().splitlines() if "assigned" in line][-1]
    assert f"proc-in-{unique}[" in a_assigned, "the worker to be killed owns no input partition"
    a_partitions = {int(p) for p in a_assigned.split(f"proc-in-{unique}[")[1].split("]")[0].split(",")}
    # Outputs keep the input key, hence the partition: A's partitions in the output prove A worked.
    early = read_topic(broker_address, f"proc-out-{unique}", timeout=10, idle=1.0)
    assert {m.partition() for m in early} & a_partitions, "the worker to be killed produced nothing yet"
    a.send_signal(signal.SIGKILL)
    feeder.join(90)
    counts = output_values(broker_address, unique, total, timeout=120)
    missing = [v for v in range(total) if counts[v] == 0]
    duplicated = sum(c - 1 for c in counts.values() if c > 1)
    print(f"\n[{driver}] SIGKILL failover: inputs={total} outputs={sum(counts.values())} "
          f"missing={len(missing)} duplicated={duplicated}")
    assert b.poll() is None, (tmp_path / "b.log").read_text()[-3000:]
    assert not missing, f"missing {len(missing)} records, e.g. {missing[:10]}"
    b_log = (tmp_path / "b.log").read_text()
    assert b_log.count("assigned") > b_assignments, "the surviving worker never took over partitions"


def test_sigterm_commits_and_restart_does_not_reprocess(broker_address, driver, unique, workers, tmp_path):
    create_topics(broker_address, unique)
    produce(broker_address, f"proc-in-{unique}", range(2000))
    worker = start_worker(broker_address, driver, unique, tmp_path / "w1.log")
    workers.append(worker)
    counts = output_values(broker_address, unique, 2000, timeout=90)
    assert len(counts) == 2000
    time.sleep(1.5)  # at least one commit interval after the last output
    started = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    code = wait_exit(worker, 15)
    log = (tmp_path / "w1.log").read_text()
    assert code == 0, log[-3000:]
    assert time.monotonic() - started < 10
    produce(broker_address, f"proc-in-{unique}", range(2000, 2500))
    restarted = start_worker(broker_address, driver, unique, tmp_path / "w2.log")
    workers.append(restarted)
    counts = output_values(broker_address, unique, 2500, timeout=90)
    time.sleep(3)
    counts = output_values(broker_address, unique, None, timeout=30)
    restarted.send_signal(signal.SIGTERM)
    assert wait_exit(restarted, 15) == 0
    assert sorted(counts) == list(range(2500))
    assert max(counts.values()) == 1, "records committed before SIGTERM were processed again"


def test_stop_policy_exits_nonzero_with_the_reason(broker_address, driver, unique, workers, tmp_path):
    create_topics(broker_address, unique)
    producer = Producer({"bootstrap.servers": broker_address})
    producer.produce(f"proc-in-{unique}", key=b"bad", value=b"not-an-int", partition=0)
    producer.flush(15)
    worker = start_worker(broker_address, driver, unique, tmp_path / "w.log", STREAMKIT_ERROR_POLICY="stop")
    workers.append(worker)
    code = wait_exit(worker, 60)
    log = (tmp_path / "w.log").read_text()
    assert code == 1, log[-3000:]
    assert f"decode failed for proc-in-{unique}[0]@0 and error_policy=stop" in log
