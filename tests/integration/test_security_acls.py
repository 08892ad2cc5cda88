"""On Apache Kafka with an authorizer (skipped elsewhere): the ACLs ``streamkit acls`` prints are
exactly enough for an exactly-once worker with a repartition topic and a table (both drivers),
applied with the printed ``kafka-acls.sh`` lines; without them the worker stops at once with one
line naming the refused resource, and a Write ACL missing on a sink stops it at its first record.

The broker is the one tests/integration/secured_kafka.py starts from ``STREAMKIT_TEST_KAFKA_BIN``
(StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``): the app's principal is
``User:alice`` over SASL_SSL with SCRAM-SHA-512, the ACLs are added as ``admin`` (a super user).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import streamkit as sk
from tests.integration.secured_kafka import KAFKA_BIN, SKIP_REASON, SecuredKafka, orders_pass_through, send_orders

pytestmark = pytest.mark.skipif(not KAFKA_BIN, reason=SKIP_REASON)
ROOT = Path(__file__).resolve().parents[2]


def admin_settings(kafka: SecuredKafka) -> sk.Settings:
    return sk.Settings(broker=kafka.sasl_ssl, sasl_mechanism="SCRAM-SHA-512", sasl_username="admin",
                       sasl_password="admin-secret", ssl_cafile=str(kafka.pki / "ca.pem"))


def alice_env(kafka: SecuredKafka, driver: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    """As tests/apps/acl_app.py says in code (SCRAM-SHA-512, alice), over TLS to this broker."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("STREAMKIT_")}
    return {**clean, "ACL_PREFIX": prefix, "STREAMKIT_BROKER": kafka.sasl_ssl, "STREAMKIT_DRIVER": driver,
            "STREAMKIT_SECURITY_PROTOCOL": "SASL_SSL", "STREAMKIT_SSL_CAFILE": str(kafka.pki / "ca.pem"),
            "STREAMKIT_WEB_ENABLED": "false", "STREAMKIT_DATA_DIR": str(tmp_path / "state")}


def streamkit(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkit", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def apply(lines: list[str]) -> None:
    env = {**os.environ, "PATH": f"{KAFKA_BIN}{os.pathsep}{os.environ['PATH']}", "KAFKA_HEAP_OPTS": "-Xmx256m",
           "KAFKA_OPTS": "-XX:TieredStopAtLevel=1"}  # a short-lived JVM: starts faster
    for line in lines:
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Adding ACLs" in done.stdout, (line, done.stdout, done.stderr)


def refused_line(env: dict[str, str]) -> str:
    out = streamkit(env, "worker", "-A", "tests.apps.acl_app:app", "-l", "critical", timeout=60)
    assert out.returncode == 2, out.stderr[-3000:]
    lines = out.stderr.splitlines()  # librdkafka's CRITICAL TXNERR/FATAL lines are logged at ERROR: not shown
    assert len(lines) == 1 and lines[0].startswith("streamkit: "), out.stderr[-3000:]
    return lines[0]


def printed_acls(kafka: SecuredKafka, env: dict[str, str], tmp_path: Path) -> list[str]:
    admin_props = kafka.admin_properties(tmp_path / "admin.properties")
    printed = streamkit(env, "acls", "-A", "tests.apps.acl_app:app", "--command-config", str(admin_props))
    assert printed.returncode == 0, printed.stderr
    return [line for line in printed.stdout.splitlines() if not line.startswith("#")]


def start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "w") as log:
        worker = subprocess.Popen([sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.acl_app:app",
                                   "-l", "info"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while "assigned" not in log_path.read_text().lower():
        assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
        time.sleep(0.2)
    return worker



def test_the_printed_acls_are_exactly_enough(secured_kafka, driver, tmp_path):
    prefix = f"acl{uuid.uuid4().hex[:6]}-"
    env = alice_env(secured_kafka, driver, prefix, tmp_path)
    lines = printed_acls(secured_kafka, env, tmp_path)
    topic_lines = [line for line in lines if " --topic " in line]

    assert refused_line(env).startswith(f"streamkit: cannot create {prefix}")  # no ACL at all
    apply(topic_lines)
    refused = refused_line(env)  # aiokafka joins the group first, confluent registers its transactional id first
    assert refused in (f"streamkit: the broker refused User:alice access to {what} (no ACL allows it): grant the ACLs "
                       "`streamkit acls -A <module:app>` prints" for what in (f"group '{prefix}acl-demo'",
                                                                          "a transactional id")), refused
    apply([line for line in lines if line not in topic_lines])

    log_path = tmp_path / "worker.log"
    worker = start_worker(env, log_path)
    text = orders_pass_through(worker, log_path, admin_settings(secured_kafka), prefix)
    assert not [line for line in text.splitlines() if "uthorization" in line], text[-3000:]


def test_a_write_acl_missing_on_a_sink_stops_the_worker_in_one_line(secured_kafka, driver, tmp_path):
    prefix = f"acw{uuid.uuid4().hex[:6]}-"
    env = alice_env(secured_kafka, driver, prefix, tmp_path)
    sink = f"{prefix}large-orders"
    lines = printed_acls(secured_kafka, env, tmp_path)
    assert [line for line in lines if line.endswith(f" --topic {sink}") and " --operation Write " in line]
    apply([line.replace(" --operation Write ", " ") if line.endswith(f" --topic {sink}") else line for line in lines])

    log_path = tmp_path / "worker.log"
    worker = start_worker(env, log_path)  # every ACL at start is there: Describe and Create on the sink too
    try:
        send_orders(admin_settings(secured_kafka), prefix)
        code = worker.wait(60)
    except subprocess.TimeoutExpired:
        code = None  # still running a minute later
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    text = log_path.read_text()
    assert code == 2, text[-3000:]
    last = text.splitlines()[-1]
    assert last == (f"streamkit: the broker refused User:alice access to topic '{sink}' (no ACL allows it): "
                    "grant the ACLs `streamkit acls -A <module:app>` prints"), text[-3000:]
    assert len([line for line in text.splitlines() if line.startswith("streamkit: ")]) == 1, text[-3000:]
    assert "Traceback" not in text and "alice-secret" not in text, text[-3000:]
