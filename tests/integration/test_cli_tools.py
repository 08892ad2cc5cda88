"""consume, topics describe/delete, groups and dlq replay as a user runs them, on the dev broker."""
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from streamkit.testing import confluent_conf, read_topic

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.pipeline:app"


def cli(*args, env=None, timeout=90):
    return subprocess.run([sys.executable, "-m", "streamkit", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def pipeline_env(broker_address, unique):
    return {"STREAMKIT_BROKER": broker_address, "PIPE_APP_ID": f"tools-{unique}", "PIPE_IN": f"tools-in-{unique}",
            "PIPE_OUT": f"tools-out-{unique}", "PIPE_PARTITIONS": "2"}


def produce(broker_address, topic, records):
    """``records``: (key, value, partition, headers); one flush, so they travel in few batches
    (the dev broker's ListOffsets answers a batch's base offset + 1: the end must come from fetches)."""
    producer = Producer(confluent_conf(broker_address, **{"linger.ms": 50}))
    for key, value, partition, headers in records:
        producer.produce(topic, value, key, partition=partition, headers=headers)
    assert producer.flush(20) == 0


def test_consume_reads_to_the_end_decoded_or_raw_on_both_drivers(broker_address, unique):
    env = pipeline_env(broker_address, unique)
    topic = env["PIPE_IN"]
    assert cli("topics", "create", topic, "--partitions", "2", "--broker", broker_address).returncode == 0
    produce(broker_address, topic, [(f"k{i}".encode(), str(i).encode(), i % 2, [("h", b"v")]) for i in range(7)]
            + [(b"bin", b"\xff\xfe", 0, None)])
    for driver in ("aiokafka", "confluent"):
        result = cli("consume", topic, "-A", APP, "--from-beginning", "--json", env={**env, "STREAMKIT_DRIVER": driver})
        assert result.returncode == 0, (driver, result.stderr)
        lines = [orjson.loads(line) for line in result.stdout.splitlines()]
        assert len(lines) == 8, (driver, result.stdout, result.stderr)
        decoded = sorted(r["value"] for r in lines if r["key"] != "bin")
        assert decoded == list(range(7)) and all(r["headers"] == [["h", "v"]] for r in lines if r["key"] != "bin")
        [bad] = [r for r in lines if r["key"] == "bin"]  # not an int: shown raw, with why
        assert bad["value"] == "//4=" and bad["value_encoding"] == "base64" and "value_error" in bad
    raw = cli("consume", topic, "--broker", broker_address, "--from-beginning", "--partition", "1", "--max", "2")
    assert raw.returncode == 0 and len(raw.stdout.splitlines()) == 2 and "key=k1  value=1  h=v" in raw.stdout


def test_consume_follows_from_the_end(broker_address, unique):
    topic = f"tools-follow-{unique}"
    assert cli("topics", "create", topic, "--broker", broker_address).returncode == 0
    produce(broker_address, topic, [(b"old", b"old", 0, None)])
    follower = subprocess.Popen([sys.executable, "-m", "streamkit", "tail", topic, "--broker", broker_address,
                                 "--max", "1", "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        deadline = time.monotonic() + 60
        while follower.poll() is None and time.monotonic() < deadline:  # until it has started and seen one
            produce(broker_address, topic, [(b"new", b"new", 0, None)])
            try:
                follower.wait(1.0)
            except subprocess.TimeoutExpired:
                pass
        out, err = follower.communicate(timeout=10)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert orjson.loads(out)["value"] == "new"  # the record written before it started is not shown


def test_topics_describe_and_delete(broker_address, unique):
    topic = f"tools-desc-{unique}"
    assert cli("topics", "create", topic, "--partitions", "2", "--config", "retention.ms=3600000",
               "--broker", broker_address).returncode == 0
    produce(broker_address, topic, [(None, b"x", 1, None)] * 3)
    for driver in ("aiokafka", "confluent"):
        result = cli("topics", "describe", topic, "--broker", broker_address, "--driver", driver)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == f"{topic}\tpartitions=2\treplicas=1"
        assert lines[1].startswith("  partition=0\tleader=") and lines[1].endswith("earliest=0\tlatest=0\trecords=0")
        assert lines[2].endswith("earliest=0\tlatest=3\trecords=3"), (driver, lines)
        every = cli("topics", "describe", topic, "--broker", broker_address, "--driver", driver, "--all-configs")
        assert "  retention.ms=3600000" in every.stdout.splitlines(), (driver, every.stdout)
        # the dev broker reports the topic's own configs with source DEFAULT_CONFIG: shown, or said so
        assert ("  retention.ms=3600000" in lines or "none reported as set on the topic (--all-configs shows the"
                in result.stdout), (driver, result.stdout)
    deleted = cli("topics", "delete", topic, f"nope-{unique}", "--broker", broker_address, "--yes")
    assert deleted.stdout.splitlines() == [f"deleted {topic}", f"not deleted nope-{unique}: does not exist"]
    assert deleted.returncode == 1
    gone = cli("topics", "describe", topic, "--broker", broker_address)
    assert gone.returncode != 0 and "does not exist" in gone.stderr


def test_groups_shows_the_apps_lag(broker_address, unique):
    env = pipeline_env(broker_address, unique)
    topic = env["PIPE_IN"]
    assert cli("topics", "create", topic, "--partitions", "2", "--broker", broker_address).returncode == 0
    produce(broker_address, topic, [(b"k", b"1", 0, None)] * 5 + [(b"k", b"1", 1, None)] * 2)
    committer = Consumer(confluent_conf(broker_address, **{"group.id": env["PIPE_APP_ID"]}))
    committer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    committer.close()
    for driver in ("aiokafka", "confluent"):
        result = cli("groups", "-A", APP, env={**env, "STREAMKIT_DRIVER": driver})
        assert result.returncode == 0, result.stderr
        rows = [line.split() for line in result.stdout.splitlines()]
        assert rows[2:] == [[topic, "0", "3", "5", "2"], [topic, "1", "-", "2", "2"], ["total", "lag", "4"]], \
            (driver, result.stdout)


def test_dlq_replay_sends_dead_letters_back(broker_address, unique):
    env = pipeline_env(broker_address, unique)
    source, dlq = env["PIPE_IN"], f"tools-{unique}-dlq"
    for name in (source, dlq):
        assert cli("topics", "create", name, "--partitions", "2", "--broker", broker_address).returncode == 0

    def letter(offset, error):
        return [("streamkit-error", error.encode()), ("streamkit-error-type", b"ValueError"),
                ("streamkit-stage", b"agent"), ("streamkit-source-topic", source.encode()),
                ("streamkit-source-partition", b"1"), ("streamkit-source-offset", str(offset).encode()),
                ("streamkit-app", env["PIPE_APP_ID"].encode())]
    produce(broker_address, dlq, [(b"a", b"1", 0, letter(4, "boom")), (b"b", b"2", 0, letter(5, "other")),
                                  (b"c", b"3", 1, letter(6, "boom"))])
    env["STREAMKIT_ERROR_POLICY"] = "dlq"  # the app's dead-letter topic is <id>-dlq
    dry = cli("dlq", "replay", "-A", APP, "--error", "boom", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[-1] == f"would replay 2 dead letters from {dlq}; skipped 1 filtered"
    done = cli("dlq", "replay", "-A", APP, "--error", "boom", env=env)
    assert done.returncode == 0 and done.stdout.startswith("replayed 2 dead letters"), done.stderr
    records = read_topic(broker_address, source, expect=2, timeout=20)
    assert sorted((m.partition(), m.key(), m.value()) for m in records) == [(1, b"a", b"1"), (1, b"c", b"3")]
    assert all(dict(m.headers())["streamkit-replay-of"].startswith(dlq.encode()) for m in records)
