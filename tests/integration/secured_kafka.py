"""A secured Apache Kafka broker the security tests start themselves, from the install whose
``bin`` directory ``STREAMKIT_TEST_KAFKA_BIN`` names (Kafka 4.x, KRaft); nothing else needed.

One JVM (broker and controller), every listener on 127.0.0.1 in ports 29300-29399:

- ``SASL_SSL``: SCRAM-SHA-512, users ``admin``/``admin-secret`` (a super user) and
  ``alice``/``alice-secret`` (only the ACLs a test grants), added at format time;
- ``SSL`` with ``ssl.client.auth=required`` (mTLS): the client certificate's principal
  ``User:CN=streamkit-client`` is a super user;
- ``SASL_PLAINTEXT`` with OAUTHBEARER and Kafka's unsecured JWS validator: the token's ``sub``
  is the principal (``oauth-client``, a super user);
- ``INTERNAL`` (plaintext, between broker and itself) and ``CONTROLLER``.

StandardAuthorizer with ``allow.everyone.if.no.acl.found=false``. The CA, the broker's
certificate and a client certificate whose key is encrypted are generated here with openssl
into a temporary directory (never committed); the broker is stopped by its pid at the end.
"""
from __future__ import annotations

import base64
import dataclasses
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator

KAFKA_BIN = os.environ.get("STREAMKIT_TEST_KAFKA_BIN", "")
SKIP_REASON = ("no Apache Kafka install: set STREAMKIT_TEST_KAFKA_BIN to the bin directory of Kafka 4.x "
               "(kafka-server-start.sh, kafka-storage.sh, kafka-acls.sh); the test starts a secured broker itself")
KEY_PASSWORD = "client-key-pw-7f3a"  # the client key's password (a test secret: never printed)
CLIENT_CN = "streamkit-client"
OAUTH_SUB = "oauth-client"
PORTS = range(29300, 29400)
START_TIMEOUT = 90.0


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(where: Path) -> None:
    """A CA, the broker's certificate (for 127.0.0.1 and localhost) and a client certificate with
    a key encrypted by ``KEY_PASSWORD``; in ``other/`` a CA the broker does not know, and a client
    certificate (same subject) it signed."""
    from tests.unit.transport.test_tls_settings import make_ca

    make_ca(where)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
            "-subj", "/CN=127.0.0.1", cwd=where)
    (where / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "broker.pem", "-days", "1", "-extfile", "san.cnf", cwd=where)
    (where / "broker-keystore.pem").write_text((where / "broker.key").read_text() + (where / "broker.pem").read_text())
    other = where / "other"
    other.mkdir()
    make_ca(other)
    for ca in (where, other):
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-aes-256-cbc",
                "-pass", f"pass:{KEY_PASSWORD}", "-out", "client.key", cwd=ca)
        openssl("req", "-new", "-key", "client.key", "-passin", f"pass:{KEY_PASSWORD}", "-out", "client.csr",
                "-subj", f"/CN={CLIENT_CN}", cwd=ca)
        openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "client.pem", "-days", "1", cwd=ca)


@dataclasses.dataclass(frozen=True)
class SecuredKafka:
    sasl_ssl: str   # host:port of each listener
    mtls: str
    oauth: str
    pki: Path       # ca.pem, client.pem, client.key (encrypted), other/ca.pem
    pid: int

    def admin_properties(self, path: Path) -> Path:
        """A Java client config (kafka-acls.sh --command-config) for admin over SASL_SSL."""
        path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                        "username=\"admin\" password=\"admin-secret\";\n"
                        f"ssl.truststore.type=PEM\nssl.truststore.location={self.pki / 'ca.pem'}\n")
        return path


def free_ports(count: int) -> list[int]:
    found = []
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} free ports in {PORTS}")


def properties(where: Path, ports: dict[str, int]) -> str:
    listeners = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    public = [name for name in listeners if name != "CONTROLLER"]
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@{listeners['CONTROLLER']}",
        "listeners=" + ",".join(f"{name}://{address}" for name, address in listeners.items()),
        "advertised.listeners=" + ",".join(f"{name}://{listeners[name]}" for name in public),
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL,"
        "OAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "controller.listener.names=CONTROLLER",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        f"super.users=User:ANONYMOUS;User:admin;User:CN={CLIENT_CN};User:{OAUTH_SUB}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={where / 'broker-keystore.pem'}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={where / 'ca.pem'}",
        "listener.name.mtls.ssl.client.auth=required",
        "sasl.enabled.mechanisms=SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram."
        "ScramLoginModule required;",
        "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"admin\";",
        f"log.dirs={where / 'data'}",
        "num.partitions=1",
        "offsets.topic.replication.factor=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        "",
    ])


def kafka_cluster_id() -> str:
    """A random cluster id as Kafka's ``Uuid.randomUuid`` makes one: base64url, and never starting
    with '-' (1 in 64 do), which ``kafka-storage.sh format -t`` takes for an option and fails."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def start(where: Path) -> Iterator[SecuredKafka]:
    """Generate the PKI and properties in ``where``, format and start the broker, yield it, stop it."""
    make_pki(where)
    names = ["CONTROLLER", "INTERNAL", "SASL_SSL", "MTLS", "OAUTH"]
    ports = dict(zip(names, free_ports(len(names)), strict=False))
    props = where / "server.properties"
    props.write_text(properties(where, ports))
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx512m -Xms256m", "LOG_DIR": str(where / "logs")}
    cluster_id = kafka_cluster_id()
    formatted = subprocess.run(
        [f"{KAFKA_BIN}/kafka-storage.sh", "format", "-t", cluster_id, "-c", str(props),
         "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
         "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"],
        env=env, capture_output=True, text=True, timeout=120)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    out = open(where / "broker.out", "w")
    broker = subprocess.Popen([f"{KAFKA_BIN}/kafka-server-start.sh", str(props)], env=env, stdout=out,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "Kafka Server started" not in (where / "broker.out").read_text():
            text = (where / "broker.out").read_text()
            assert broker.poll() is None, f"the secured broker exited {broker.returncode}:\n{text[-4000:]}"
            assert time.monotonic() < deadline, f"the secured broker did not start in {START_TIMEOUT} s:\n{text[-4000:]}"
            time.sleep(0.2)
        yield SecuredKafka(
            sasl_ssl=f"127.0.0.1:{ports['SASL_SSL']}",
            mtls=f"127.0.0.1:{ports['MTLS']}",
            oauth=f"127.0.0.1:{ports['OAUTH']}",
            pki=where,
            pid=broker.pid,
        )
    finally:
        stop(broker)
        out.close()


def stop(broker: subprocess.Popen) -> None:
    """SIGTERM to the broker's pid, SIGKILL after 30 s."""
    if broker.poll() is None:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(10)


def send_orders(settings: object, prefix: str) -> None:
    """20 orders (values 0, 10, ..., 190) into ``tests/apps/acl_app.py``'s input, as ``settings``' user."""
    from confluent_kafka import Producer

    from streamkit.testing import confluent_conf

    producer = Producer(confluent_conf(settings, partitioner="murmur2_random"))
    for i in range(20):
        producer.produce(f"{prefix}orders", key=f"o{i}".encode(), value=str(i * 10).encode())
    assert producer.flush(30) == 0


def orders_pass_through(worker: subprocess.Popen, log_path: Path, settings: object, prefix: str) -> str:
    """The acl_app worker turns the 20 orders into the 10 large ones (read_committed, as
    ``settings``' user), then stops cleanly on SIGINT; returns its log."""
    from streamkit.testing import read_topic

    try:
        send_orders(settings, prefix)
        large = read_topic(settings, f"{prefix}large-orders", expect=10, timeout=60, isolation="read_committed")
        assert sorted(int(m.value()) for m in large) == list(range(100, 200, 10))
    finally:
        worker.send_signal(signal.SIGINT)
        code = worker.wait(60)
    text = log_path.read_text()
    assert code == 0, text[-3000:]
    return text
