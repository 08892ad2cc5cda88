# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
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


NATIVE = {"sasl.password": "native-pw-31", "sasl.oauthbearer.client.secret": "oidc-secret-32"}


def test_credentials_in_native_client_configs_are_masked_but_reach_the_clients():
    """consumer_config/producer_config may carry librdkafka's or aiokafka's credential keys."""
    from streamkit.transport.confluent_driver import ConfluentConsumer
    from streamkit.transport.confluent_producer import ConfluentProducer

    conf = sk.App("native", consumer_config={**NATIVE, "fetch.min.bytes": 1},
                  producer_config={"sasl.password": "native-pw-31", "linger.ms": 3}).conf
    shown = repr(conf) + str(conf) + repr(dataclasses.asdict(conf))
    for secret in NATIVE.values():
        assert secret not in shown
    assert conf.consumer_config["fetch.min.bytes"] == 1
    assert ConfluentConsumer(conf, "g")._conf["sasl.oauthbearer.client.secret"] == "oidc-secret-32"
    assert ConfluentProducer(conf)._conf["sasl.password"] == "native-pw-31"


def test_aiokafka_clients_get_the_native_credentials():
    import asyncio

    from streamkit.transport.aiokafka_driver import AiokafkaProducer

    conf = sk.App("native-aio", producer_config={"sasl_plain_password": "aio-pw-33"}, sasl_mechanism="PLAIN",
                  sasl_username="u", sasl_password="").conf
    assert "aio-pw-33" not in repr(conf)

    async def build() -> str:
        return AiokafkaProducer(conf)._client.client._sasl_plain_password

    assert asyncio.run(build()) == "aio-pw-33"


def test_a_malformed_config_variable_is_not_echoed():
    with pytest.raises(sk.ConfigurationError) as caught:
        sk.Settings.from_env({"STREAMKIT_CONSUMER_CONFIG": '{"sasl.password": "leaked-34"'})
    assert "leaked-34" not in str(caught.value) and "STREAMKIT_CONSUMER_CONFIG is not a JSON object" in str(caught.value)


@pytest.mark.parametrize("driver", ["aiokafka", "confluent"])
def test_no_secret_in_a_failing_worker_s_output_at_debug(driver):
    """Every secret given through STREAMKIT_* stays out of the debug log and the error line."""
    import os
    import subprocess
    import sys

    secrets = {"STREAMKIT_SASL_PASSWORD": "pw-sasl-35", "STREAMKIT_SSL_PASSWORD": "pw-key-36",
               "STREAMKIT_WEB_AUTH_TOKEN": "tok-web-37"}
    env = {**os.environ, **secrets, "STREAMKIT_DRIVER": driver, "STREAMKIT_BROKER": "127.0.0.1:1",
           "STREAMKIT_BROKER_CONNECT_TIMEOUT": "1", "STREAMKIT_SASL_MECHANISM": "PLAIN",
           "STREAMKIT_SASL_USERNAME": "u", "STREAMKIT_CONSUMER_CONFIG": '{"sasl.password": "pw-native-38"}'}
    out = subprocess.run([sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.pipeline:app",
                          "--without-web", "-l", "debug"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "DEBUG" in out.stderr  # the debug log was on
    for secret in [*secrets.values(), "pw-native-38"]:
        assert secret not in out.stdout + out.stderr
