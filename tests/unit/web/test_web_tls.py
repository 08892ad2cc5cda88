"""The web server over HTTPS (web_ssl_certfile): views answer over TLS only, and a query
forwarded between two workers verifies the owner's certificate against web_ssl_cafile.
The CA and the server certificate are generated here."""
from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest

import streamkit as sk
from streamkit.testing import wait_for
from tests.unit.transport.test_tls_settings import openssl
from tests.unit.web.test_web_views import build, get


@pytest.fixture(scope="module")
def web_pki(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("webpki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-subj", "/CN=streamkit-web-ca", "-days", "1", cwd=where)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "web.key", "-out", "web.csr", "-subj",
            "/CN=127.0.0.1", cwd=where)
    (where / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "web.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-extfile", "san.cnf", "-out", "web.pem", cwd=where)
    return where


def tls(pki: Path) -> dict[str, str]:
    return {"web_ssl_certfile": str(pki / "web.pem"), "web_ssl_keyfile": str(pki / "web.key"),
            "web_ssl_cafile": str(pki / "ca.pem")}


async def test_views_answer_over_https_only(tmp_path, web_pki):
    app, _, base = build(tmp_path, **tls(web_pki))
    secure = base.replace("http://", "https://")
    assert app.conf.web_url == secure
    trusted = ssl.create_default_context(cafile=str(web_pki / "ca.pem"))
    async with app.running(), aiohttp.ClientSession() as session:
        assert (await get(session, f"{secure}/health", ssl=trusted))[0] == 200
        with pytest.raises(aiohttp.ClientError):
            await get(session, f"{base}/health")  # plain HTTP to the TLS port
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await get(session, f"{secure}/health")  # the system CAs do not know the test CA


async def test_a_query_is_forwarded_over_https(tmp_path, web_pki):
    a, src, base_a = build(tmp_path / "a", **tls(web_pki))
    b, _, _ = build(tmp_path / "b", name=a.id, **tls(web_pki))
    table_b = b.tables["scores"]
    trusted = ssl.create_default_context(cafile=str(web_pki / "ca.pem"))
    async with a.running(), b.running(), aiohttp.ClientSession() as session:
        def scores_of(app):
            return [tp.partition for tp in app.runtime.assigned if tp.topic == "scores"]

        await wait_for(lambda: len(scores_of(a)) == 1 and len(scores_of(b)) == 1, 10, message="one partition each")
        [owned_by_b] = scores_of(b)
        await wait_for(lambda: a.runtime.membership.owner("scores", owned_by_b) == b.conf.web_url, 10,
                       message="b's https claim reached a")
        key = next(k for k in range(20) if table_b.partition_of(table_b.key_codec.encode(k)) == owned_by_b)
        await src.send(key=key, value=5)
        await wait_for(lambda: table_b.get(key) == 5, 10, message="b stored the key")
        secure_a = base_a.replace("http://", "https://")
        assert await get(session, f"{secure_a}/tables/scores/{key}", ssl=trusted) == (200, {"key": key, "value": 5})


def test_a_key_without_a_certificate_is_refused():
    with pytest.raises(sk.ConfigurationError, match="web_ssl_keyfile is set without web_ssl_certfile"):
        sk.App("webtls", web_ssl_keyfile="/k.pem")


def test_a_certificate_that_does_not_load_is_one_line_at_start(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "STREAMKIT_DRIVER": "memory", "STREAMKIT_BROKER": f"memory://webtls-{tmp_path.name}",
           "STREAMKIT_STORE": "memory://", "STREAMKIT_WEB_PORT": "0", "STREAMKIT_DATA_DIR": str(tmp_path),
           "STREAMKIT_WEB_SSL_CERTFILE": "/nonexistent.pem"}
    out = subprocess.run([sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.pipeline:app", "-l", "error"],
                         env=env, cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.splitlines() == [
        "streamkit: web_ssl_certfile='/nonexistent.pem' / web_ssl_keyfile='' do not load ([Errno 2] No such file or "
        "directory): give a PEM certificate and its unencrypted key"], out.stderr
