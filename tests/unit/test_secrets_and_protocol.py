"""Secrets never show (repr, str, asdict, logs); security_protocol is validated; TLS asked is kept."""
from __future__ import annotations

import dataclasses
import logging

import pytest

import streamkit as sk
from streamkit.transport.security import aiokafka_common, confluent_common

SECRETS = {"sasl_password": "hunter2-sasl", "web_auth_token": "tok-9f8e7d", "ssl_password": "keypass-55"}


def test_secrets_are_masked_everywhere_but_reach_the_clients(caplog):
    app = sk.App("secret", sasl_mechanism="SCRAM-SHA-512", sasl_username="u", **SECRETS)
    conf = app.conf
    caplog.set_level(logging.DEBUG)
    logging.getLogger("test").info("settings: %s / %r / %s", conf, conf, dataclasses.asdict(conf))
    shown = repr(conf) + str(conf) + repr(dataclasses.asdict(conf)) + f"{conf.sasl_password}" + caplog.text
    for secret in SECRETS.values():
        assert secret not in shown
    assert "Secret('****')" in repr(conf)
    assert confluent_common(conf)["sasl.password"] == "hunter2-sasl"
    assert confluent_common(conf)["ssl.key.password"] == "keypass-55"
    assert aiokafka_common(dataclasses.replace(conf, ssl_password=""))["sasl_plain_password"] == "hunter2-sasl"


def test_the_password_can_come_from_a_file(tmp_path):
    path = tmp_path / "pw"
    path.write_text("from-file\n")
    conf = sk.App("pwfile", sasl_mechanism="PLAIN", sasl_username="u", sasl_password_file=str(path)).conf
    assert conf.sasl_password.reveal() == "from-file" and "from-file" not in repr(conf)
    with pytest.raises(sk.ConfigurationError, match="sasl_password_file='/nope'"):
        sk.App("nofile", sasl_password_file="/nope")


@pytest.mark.parametrize("given, effective", [
    ("sasl_ssl", "SASL_SSL"), ("SASL_SSl", "SASL_SSL"), ("ssl", "SSL"), ("plaintext", "PLAINTEXT"),
])
def test_security_protocol_any_case(given, effective):
    assert sk.App("proto", security_protocol=given).conf.effective_security_protocol == effective


@pytest.mark.parametrize("given, message", [("TLS", "did you mean 'SSL'"), ("SASL", "expected one of")])
def test_a_wrong_security_protocol_is_refused(given, message):
    with pytest.raises(sk.ConfigurationError, match=message):
        sk.App("proto", security_protocol=given)


def test_sasl_over_tls_without_certificate_files():
    """A broker with a publicly trusted certificate: SASL plus security_protocol="SSL" is SASL_SSL."""
    conf = sk.App("pub", security_protocol="SSL", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p").conf
    assert conf.effective_security_protocol == "SASL_SSL"
    assert confluent_common(conf)["security.protocol"] == "sasl_ssl"
