"""OAUTHBEARER: a token function reaches both drivers (librdkafka's oauth_cb, aiokafka's token
provider), OIDC client credentials reach librdkafka with the secret masked, and a missing token
source is refused naming what to set. (No OAUTHBEARER broker here: the clients are built, not
connected.)"""
from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

import streamkit as sk
from streamkit.transport.security import aiokafka_common, confluent_common

CALLS: list[float] = []


def fixed_token() -> tuple[str, float]:
    """A token source for the tests (named as ``module:function`` in STREAMKIT_SASL_OAUTH_TOKEN)."""
    CALLS.append(time.time())
    return "token-81", time.time() + 60


def oauth(**settings) -> sk.Settings:
    return sk.Settings(broker="127.0.0.1:1", sasl_mechanism="OAUTHBEARER", **settings)


def test_librdkafka_asks_the_token_function():
    from confluent_kafka import Producer

    CALLS.clear()
    native = confluent_common(oauth(sasl_oauth_token=fixed_token, security_protocol="SASL_PLAINTEXT"))
    assert native["sasl.mechanism"] == "OAUTHBEARER" and "sasl.password" not in native
    Producer({**native, "log_level": 0})  # librdkafka asks for the first token when the client is made
    assert len(CALLS) == 1


def test_aiokafka_asks_the_token_function():
    opts = aiokafka_common(oauth(sasl_oauth_token=fixed_token))
    assert opts["sasl_mechanism"] == "OAUTHBEARER" and "sasl_plain_password" not in opts
    assert asyncio.run(opts["sasl_oauth_token_provider"].token()) == "token-81"


def test_the_token_function_can_be_named_in_the_environment():
    settings = sk.Settings.from_env({"STREAMKIT_SASL_MECHANISM": "OAUTHBEARER",
                                     "STREAMKIT_SASL_OAUTH_TOKEN": "tests.unit.transport.test_oauthbearer:fixed_token"})
    assert settings.sasl_oauth_token()[0] == "token-81"
    with pytest.raises(sk.ConfigurationError, match="sasl_oauth_token='nowhere:token': cannot import it"):
        sk.Settings.from_env({"STREAMKIT_SASL_MECHANISM": "OAUTHBEARER", "STREAMKIT_SASL_OAUTH_TOKEN": "nowhere:token"})


def test_oidc_client_credentials_reach_librdkafka_masked():
    settings = oauth(driver="confluent", sasl_oauth_token_endpoint_url="https://idp.example/token",
                     sasl_oauth_client_id="worker", sasl_oauth_client_secret="oidc-secret-82", sasl_oauth_scope="kafka")
    native = confluent_common(settings)
    assert native["sasl.oauthbearer.method"] == "oidc" and native["sasl.oauthbearer.client.secret"] == "oidc-secret-82"
    assert native["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/token"
    assert native["sasl.oauthbearer.scope"] == "kafka" and native["sasl.oauthbearer.client.id"] == "worker"
    assert "oidc-secret-82" not in repr(settings) + str(dataclasses.asdict(settings))


@pytest.mark.parametrize("settings, message", [
    ({}, "sasl_mechanism='OAUTHBEARER' needs sasl_oauth_token"),
    ({"sasl_oauth_token_endpoint_url": "https://idp.example/token"}, "need driver='confluent'"),
    ({"sasl_oauth_token": "a token"}, "cannot import it"),
    ({"sasl_oauth_token": 42}, "must be a function"),
])
def test_an_unusable_token_source_is_refused(settings, message):
    with pytest.raises(sk.ConfigurationError, match=message):
        oauth(**settings)
