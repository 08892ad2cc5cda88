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
from tests.helpers import committed_total, wait_until

ROOT = Path(__file__).resolve().parents[2]


def start_worker(broker, driver, unique, log_path, **extra_env):
    env = {**os.environ, "STREAMKIT_WEB_ENABLED": "false", **extra_env, "STREAMKIT_BROKER": broker,
           "STREAMKIT_DRIVER": driver, "PIPE_APP_ID": f"proc-{unique}",
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


def values_until(stop, *, after, sent):
    """0, 1, 2, ... until ``after`` more once ``stop`` is set; each value is appended to ``sent``."""
    n, left = 0, after
    while left > 0:
        if stop.is_set():
            left -= 1
        sent.append(n)
        yield n
        n += 1


def output_values(broker, unique, expect, timeout):
    records = read_topic(broker, f"proc-out-{unique}", expect=expect, timeout=timeout)
    return Counter(int(m.value()) for m in records)


def committed(broker, unique):
    """Input records the group has checkpointed."""
    return committed_total(broker, f"proc-{unique}", f"proc-in-{unique}", 6)


def last_assignment(log_path, topic):
    """The ``topic`` partitions of the worker's latest assignment, from its log (the whole of it:
    an incremental rebalance adds some and keeps the rest)."""
    lines = [line.split("owns now:")[1] for line in log_path.read_text().splitlines() if "owns now:" in line]
    if not lines or f"{topic}[" not in lines[-1]:
        return set()
    return {int(p) for p in lines[-1].split(f"{topic}[")[1].split("]")[0].split(",")}


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
    a = start_worker(broker_address, driver, unique, tmp_path / "a.log")
    b = start_worker(broker_address, driver, unique, tmp_path / "b.log")
    workers += [a, b]
    wait_until(lambda: all("assigned" in (tmp_path / f"{w}.log").read_text() for w in "ab"), 60, "both workers joined")
    # The input flows until 1000 records after the kill: the kill lands mid-stream, whenever it comes.
    killed, sent = threading.Event(), []
    feeder = threading.Thread(target=produce, args=(broker_address, f"proc-in-{unique}",
                                                    values_until(killed, after=1000, sent=sent), 300),
                              daemon=True)
    feeder.start()

    def a_is_working():
        """A and B split the input, and A's share is in the output (outputs keep the input key,
        hence the partition): the partitions A owns."""
        a_partitions = last_assignment(tmp_path / "a.log", f"proc-in-{unique}")
        b_partitions = last_assignment(tmp_path / "b.log", f"proc-in-{unique}")
        if not (a_partitions and b_partitions and a_partitions.isdisjoint(b_partitions)
                and a_partitions | b_partitions == set(range(6))):
            return None
        early = read_topic(broker_address, f"proc-out-{unique}", timeout=10, idle=0.5)
        return a_partitions if {m.partition() for m in early} & a_partitions else None

    try:
        wait_until(a_is_working, 60, "both workers process their share")
        b_assignments = (tmp_path / "b.log").read_text().count("assigned")
        a.send_signal(signal.SIGKILL)
    finally:
        killed.set()  # the feeder ends on a failure too
    feeder.join(90)
    assert not feeder.is_alive(), "the feeder did not finish within 90 s of the kill"
    total = len(sent)
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
    worker.send_signal(signal.SIGTERM)  # right after the last output: stopping commits it
    code = wait_exit(worker, 15)
    log = (tmp_path / "w1.log").read_text()
    assert code == 0, log[-3000:]
    assert committed(broker_address, unique) == 2000, "the stopped worker did not commit what it processed"
    produce(broker_address, f"proc-in-{unique}", range(2000, 2500))
    restarted = start_worker(broker_address, driver, unique, tmp_path / "w2.log")
    workers.append(restarted)
    # Once it committed all 2500, whatever it would process again is already in the output.
    wait_until(lambda: committed(broker_address, unique) == 2500, 90, "the restarted worker committed every input")
    restarted.send_signal(signal.SIGTERM)
    assert wait_exit(restarted, 15) == 0
    counts = output_values(broker_address, unique, None, timeout=30)
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
