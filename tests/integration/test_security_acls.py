"""On Apache Kafka with an authorizer (skipped elsewhere): the ACLs ``streamkit acls`` prints are
exactly enough for an exactly-once worker with a repartition topic and a table (both drivers),
applied with the printed ``kafka-acls.sh`` lines; without them the worker stops at once with one
line naming the refused resource.

Needs ``STREAMKIT_TEST_ACL_BROKER=host:port``: a SASL_PLAINTEXT listener with PLAIN, users
``admin``/``admin-secret`` (a super user) and ``alice``/``alice-secret``, StandardAuthorizer,
``allow.everyone.if.no.acl.found=false``; and ``STREAMKIT_TEST_KAFKA_BIN``, the directory of
``kafka-acls.sh``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

import streamkit as sk
from streamkit.testing import confluent_conf, read_topic

BROKER = os.environ.get("STREAMKIT_TEST_ACL_BROKER")
KAFKA_BIN = os.environ.get("STREAMKIT_TEST_KAFKA_BIN", "")
pytestmark = pytest.mark.skipif(not BROKER or not KAFKA_BIN, reason=(
    "no broker with an authorizer: set STREAMKIT_TEST_ACL_BROKER=host:port (SASL_PLAINTEXT PLAIN, admin/admin-secret "
    "super user, alice/alice-secret, StandardAuthorizer) and STREAMKIT_TEST_KAFKA_BIN (kafka-acls.sh's directory)"))
ROOT = Path(__file__).resolve().parents[2]
ADMIN = sk.Settings(broker=BROKER or "", sasl_mechanism="PLAIN", sasl_username="admin", sasl_password="admin-secret")


def alice_env(driver: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ACL_PREFIX": prefix, "STREAMKIT_BROKER": BROKER or "", "STREAMKIT_DRIVER": driver,
            "STREAMKIT_SASL_MECHANISM": "PLAIN", "STREAMKIT_SASL_PASSWORD": "alice-secret",
            "STREAMKIT_WEB_ENABLED": "false", "STREAMKIT_DATA_DIR": str(tmp_path / "state")}


def streamkit(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkit", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def apply(lines: list[str]) -> None:
    env = {**os.environ, "PATH": f"{KAFKA_BIN}{os.pathsep}{os.environ['PATH']}", "KAFKA_HEAP_OPTS": "-Xmx256m"}
    for line in lines:
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Adding ACLs" in done.stdout, (line, done.stdout, done.stderr)


def refused_line(env: dict[str, str]) -> str:
    out = streamkit(env, "worker", "-A", "tests.apps.acl_app:app", "-l", "critical", timeout=60)
    assert out.returncode == 2, out.stderr[-3000:]
    lines = out.stderr.splitlines()  # librdkafka reports a fatal transaction error itself, at CRITICAL
    assert lines and lines[-1].startswith("streamkit: ") and len(lines) <= 2, out.stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("driver", ["aiokafka", "confluent"])
def test_the_printed_acls_are_exactly_enough(driver, tmp_path):
    prefix = f"acl{uuid.uuid4().hex[:6]}-"
    env = alice_env(driver, prefix, tmp_path)
    admin_props = tmp_path / "admin.properties"
    admin_props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache."
                           "kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
                           "password=\"admin-secret\";\n")
    printed = streamkit(env, "acls", "-A", "tests.apps.acl_app:app", "--command-config", str(admin_props))
    assert printed.returncode == 0, printed.stderr
    lines = [line for line in printed.stdout.splitlines() if not line.startswith("#")]
    topic_lines = [line for line in lines if " --topic " in line]

    assert refused_line(env).startswith(f"streamkit: cannot create {prefix}")  # no ACL at all
    apply(topic_lines)
    refused = refused_line(env)  # aiokafka joins the group first, confluent registers its transactional id first
    assert refused in (f"streamkit: the broker refused User:alice access to {what} (no ACL allows it): grant the ACLs "
                       "`streamkit acls -A <module:app>` prints" for what in (f"group '{prefix}acl-demo'",
                                                                          "a transactional id")), refused
    apply([line for line in lines if line not in topic_lines])

    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen([sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.acl_app:app",
                                   "-l", "info"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while "assigned" not in log_path.read_text().lower():
            assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        producer = Producer(confluent_conf(ADMIN, partitioner="murmur2_random"))
        for i in range(20):
            producer.produce(f"{prefix}orders", key=f"o{i}".encode(), value=str(i * 10).encode())
        assert producer.flush(30) == 0
        large = read_topic(ADMIN, f"{prefix}large-orders", expect=10, timeout=60, isolation="read_committed")
        assert sorted(int(m.value()) for m in large) == list(range(100, 200, 10))
    finally:
        worker.send_signal(signal.SIGINT)
        code = worker.wait(60)
    text = log_path.read_text()
    assert code == 0, text[-3000:]
    assert not [line for line in text.splitlines() if "uthorization" in line], text[-3000:]
