"""A TLS misconfiguration is one line naming the setting, exit 2, at the first attempt on both
drivers (issue 20: an encrypted key without its password made aiokafka prompt and die with
``OSError: [Errno 22]``, confluent retry until 'cannot reach'; TLS against a plaintext listener
retried for broker_connect_timeout on aiokafka). Keys and certificates are generated here."""
from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import streamkit as sk
from streamkit.transport.aiokafka_diagnosis import aiokafka_diagnose
from tests.unit.transport.test_tls_settings import make_ca, openssl


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA and a client certificate whose key is encrypted with ``key-pw-61``."""
    where = tmp_path_factory.mktemp("pki")
    make_ca(where)
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-aes256", "-pass",
            "pass:key-pw-61", "-out", "client.key", cwd=where)
    openssl("req", "-new", "-key", "client.key", "-passin", "pass:key-pw-61", "-subj", "/CN=client", "-out",
            "client.csr", cwd=where)
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days",
            "1", "-out", "client.pem", cwd=where)
    return where


def topics_list(pki: Path, driver: str, **env: str) -> subprocess.CompletedProcess:
    tls = {"STREAMKIT_SSL_CAFILE": str(pki / "ca.pem"), "STREAMKIT_SSL_CERTFILE": str(pki / "client.pem"),
           "STREAMKIT_SSL_KEYFILE": str(pki / "client.key")}
    return subprocess.run([sys.executable, "-m", "streamkit", "topics", "list", "--broker", "127.0.0.1:1",
                           "--driver", driver], env={**os.environ, **tls, **env}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("driver", ["aiokafka", "confluent"])
@pytest.mark.parametrize("password, cause", [
    ("", "is encrypted: set ssl_password (or ssl_password_file) to its password"),
    ("wrong-pw-62", "ssl_password does not decrypt ssl_keyfile="),
])
def test_an_encrypted_key_without_its_password_is_one_line(pki, driver, password, cause):
    out = topics_list(pki, driver, STREAMKIT_SSL_PASSWORD=password)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.splitlines()
    assert line.startswith("streamkit: ") and "client.key" in line, line
    if driver == "aiokafka" or password:
        assert cause in line, line
    else:  # librdkafka cannot tell an encrypted key from a damaged one
        assert "if it is encrypted, set ssl_password (or ssl_password_file)" in line, line
    assert "Enter PEM pass phrase" not in out.stdout + out.stderr and "cannot reach" not in line
    assert "wrong-pw-62" not in out.stdout + out.stderr


async def test_tls_against_a_plaintext_listener_is_named_at_once():
    """A plaintext listener drops the TLS hello (a reset): that is the protocol, not the network."""
    async def plaintext_listener(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        writer.transport.abort()

    server = await asyncio.start_server(plaintext_listener, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        settings = sk.Settings(broker=f"127.0.0.1:{port}", security_protocol="SSL")
        cause = await aiokafka_diagnose(settings)
    finally:
        server.close()
    assert cause is not None and "closed the TLS handshake: check security_protocol (now SSL)" in cause, cause


async def test_nothing_listening_is_left_to_the_retry():
    settings = sk.Settings(broker="127.0.0.1:1", security_protocol="SSL")
    assert await aiokafka_diagnose(settings) is None
