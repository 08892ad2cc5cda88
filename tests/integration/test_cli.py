"""The streamkit command as a user runs it (and the README demo)."""
import os
import subprocess
import sys
from pathlib import Path

import orjson

import streamkit as sk
from streamkit.testing import read_topic

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, env=None, cwd=ROOT, timeout=60):
    return subprocess.run([sys.executable, "-m", "streamkit", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "STREAMKIT_WEB_ENABLED": "false", **(env or {})})


def test_version():
    result = cli("--version")
    assert result.returncode == 0 and sk.__version__ in result.stdout


def test_unreachable_broker_is_one_clear_line_and_nonzero_exit():
    env = {"STREAMKIT_BROKER": "127.0.0.1:1", "STREAMKIT_BROKER_CONNECT_TIMEOUT": "2"}
    for args, address in ((("worker", "-A", "tests.apps.pipeline:app", "--without-web", "--web-host", "127.0.0.1"),
                           "127.0.0.1:1"),
                          (("topics", "list"), "127.0.0.1:1"),
                          (("topics", "list", "-A", "tests.apps.pipeline:app", "--driver", "confluent"), "127.0.0.1:1"),
                          (("topics", "create", "x", "--broker", "127.0.0.1:2"), "127.0.0.1:2")):  # the flag wins
        result = cli(*args, env=env)
        assert result.returncode == 2, result.stderr
        # every command honours broker_connect_timeout (topics commands waited a fixed 15 s)
        assert f"cannot reach the Kafka broker at {address} after" in result.stderr and " in 2s (" in result.stderr, \
            (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_badly_typed_setting_refuses_the_worker_at_start_in_one_line():
    """``commit_interval="soon"`` read from a config file once started a worker that never committed."""
    for env in ({"CONFIGURED_COMMIT_INTERVAL": "soon"}, {"STREAMKIT_COMMIT_INTERVAL": "soon"}):
        result = cli("worker", "-A", "tests.apps.configured:app", env={"STREAMKIT_BROKER": "127.0.0.1:1", **env})
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "commit_interval='soon': expected a number of seconds" in lines[0].lower(), lines
    result = cli("worker", "-A", "tests.apps.configured:app", "--web-port", "66x")
    assert result.returncode == 2 and "'66x' is not a valid integer" in result.stderr, result.stderr


def test_topics_create_list_describe_send_and_agents(broker_address, unique):
    name = f"cli-{unique}"
    for driver in ("aiokafka", "confluent"):
        created = cli("topics", "create", f"{name}-{driver}", "--partitions", "3", "--broker", broker_address,
                      "--driver", driver)
        assert created.returncode == 0, created.stderr
    listed = cli("topics", "list", "--broker", broker_address)
    assert f"{name}-aiokafka\tpartitions=3" in listed.stdout and f"{name}-confluent\tpartitions=3" in listed.stdout
    for driver in ("aiokafka", "confluent"):  # both report the replication factor (aiokafka said 0)
        described = cli("topics", "describe", f"{name}-aiokafka", "--broker", broker_address, "--driver", driver)
        assert "partitions=3\treplicas=1" in described.stdout, (driver, described.stdout, described.stderr)
    missing = cli("topics", "describe", f"nope-{unique}", "--broker", broker_address)
    assert missing.returncode != 0 and "does not exist" in missing.stderr

    env = {"STREAMKIT_BROKER": broker_address, "PIPE_APP_ID": f"cli-{unique}", "PIPE_IN": f"cli-in-{unique}",
           "PIPE_OUT": f"cli-out-{unique}", "PIPE_PARTITIONS": "2"}
    sent = cli("send", "-A", "tests.apps.pipeline:app", "copy", "--key", "k1", "--value", "42", env=env)
    assert sent.returncode == 0, sent.stderr
    records = read_topic(broker_address, f"cli-in-{unique}", expect=1, timeout=20)
    assert [(m.key(), orjson.loads(m.value())) for m in records] == [(b"k1", 42)]
    agents = cli("agents", "-A", "tests.apps.pipeline:app", env=env)
    assert f"copy\ttopic=cli-in-{unique}" in agents.stdout and "Copy each record" in agents.stdout
    tables = cli("tables", "-A", "wordcount:app", cwd=ROOT / "examples")
    assert "word-counts\ttable\tpartitions=4\tstore=rocksdb://\tchangelog=wordcount-word-counts-changelog" in tables.stdout


def test_readme_demo_runs(tmp_path):
    result = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "counted (expected 39)" in result.stdout and "39 counted" in result.stdout
    assert '{"word":"the","count":5}' in result.stdout
    assert "worker stopped cleanly" in result.stdout


def test_dev_broker_command_prints_its_address_and_stops_on_sigterm():
    process = subprocess.Popen([sys.executable, "-m", "streamkit", "dev-broker"], cwd=ROOT, stdout=subprocess.PIPE,
                               text=True)
    try:
        address = process.stdout.readline().strip()
        host, port = address.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        from streamkit.devbroker import wait_for_port

        assert wait_for_port(host, int(port), 5)
    finally:
        process.terminate()
        assert process.wait(10) == 0


def test_reset_deletes_the_group_and_internal_topics_on_the_broker(broker_address, unique, driver, tmp_path):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    app_id, source = f"reset-{driver}-{unique}", f"reset-in-{driver}-{unique}"
    env = {"STREAMKIT_BROKER": broker_address, "STREAMKIT_DRIVER": driver, "COUNTER_APP_ID": app_id,
           "COUNTER_IN": source, "STREAMKIT_DATA_DIR": str(tmp_path)}
    changelog = f"{app_id}-counts-changelog"
    for topic in (source, changelog):
        assert cli("topics", "create", topic, "--partitions", "4", "--broker", broker_address).returncode == 0
    group = Consumer({"bootstrap.servers": broker_address, "group.id": app_id, "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition(source, 0, 3)], asynchronous=False)
    group.close()
    (tmp_path / app_id / "counts" / "0").mkdir(parents=True)

    result = cli("reset", "-A", "tests.apps.counter:app", "--yes", env=env)
    assert result.returncode == 0, result.stderr
    topics = AdminClient({"bootstrap.servers": broker_address}).list_topics(timeout=10).topics
    assert changelog not in topics and source in topics  # internal topics go, input stays
    reader = Consumer({"bootstrap.servers": broker_address, "group.id": app_id, "enable.auto.commit": False})
    try:
        assert reader.committed([TopicPartition(source, 0)], timeout=10)[0].offset < 0  # no committed offset
    finally:
        reader.close()
    assert not (tmp_path / app_id).exists()
