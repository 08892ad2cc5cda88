"""TLS settings reach both drivers' clients: CA directory, revocation list, hostname check; every
secret may come from a file (issue 20)."""
from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

import streamkit as sk
from streamkit.transport.security import aiokafka_common, confluent_common


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(where: Path) -> None:
    """A throw-away CA in ``where`` (ca.key, ca.pem), valid for a day; never committed."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-subj", "/CN=streamkit-test-ca", "-days", "1", cwd=where)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A throw-away CA and an empty revocation list it signed (generated here, never committed)."""
    where = tmp_path_factory.mktemp("pki")
    make_ca(where)
    (where / "index.txt").write_text("")
    (where / "crlnumber").write_text("01\n")
    (where / "ca.cnf").write_text("[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\ncrlnumber = crlnumber\n"
                                  "default_md = sha256\ndefault_crl_days = 1\n")
    openssl("ca", "-config", "ca.cnf", "-gencrl", "-keyfile", "ca.key", "-cert", "ca.pem", "-out", "crl.pem",
            cwd=where)
    return where


def test_a_revocation_list_and_no_hostname_check_reach_both_drivers(pki):
    conf = sk.App("tls", ssl_cafile=str(pki / "ca.pem"), ssl_crlfile=str(pki / "crl.pem"),
                  ssl_check_hostname=False).conf
    context = aiokafka_common(conf)["ssl_context"]
    assert context.verify_flags & ssl.VERIFY_CRL_CHECK_LEAF and context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED  # the chain is still verified
    native = confluent_common(conf)
    assert native["ssl.crl.location"] == str(pki / "crl.pem")
    assert native["ssl.endpoint.identification.algorithm"] == "none" and native["security.protocol"] == "ssl"


def test_hostnames_are_checked_by_default(pki):
    conf = sk.App("tls-default", ssl_cafile=str(pki / "ca.pem")).conf
    assert aiokafka_common(conf)["ssl_context"].check_hostname is True
    assert "ssl.endpoint.identification.algorithm" not in confluent_common(conf)  # librdkafka's default: https


def test_a_ca_directory_means_tls_on_both_drivers(pki):
    conf = sk.App("tls-capath", ssl_capath=str(pki)).conf
    assert conf.effective_security_protocol == "SSL"
    assert confluent_common(conf)["ssl.ca.location"] == str(pki)
    assert aiokafka_common(conf)["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(sk.ConfigurationError, match="ssl_cafile or ssl_capath, not both"):
        sk.App("tls-both", ssl_cafile=str(pki / "ca.pem"), ssl_capath=str(pki))


def test_every_secret_can_come_from_a_file(tmp_path):
    for name, value in (("ssl", "key-pw-51"), ("web", "web-tok-52")):
        (tmp_path / name).write_text(f"{value}\n")
    conf = sk.App("files", ssl_password_file=str(tmp_path / "ssl"), web_auth_token_file=str(tmp_path / "web")).conf
    assert conf.ssl_password.reveal() == "key-pw-51" and conf.web_auth_token.reveal() == "web-tok-52"
    assert "key-pw-51" not in repr(conf) and "web-tok-52" not in repr(conf)
    with pytest.raises(sk.ConfigurationError, match="web_auth_token_file='/nonexistent': No such file"):
        sk.App("nofile", web_auth_token_file="/nonexistent")
