"""What the clients say when no retry can help, turned into the cause and the setting to fix
(texts as aiokafka and librdkafka print them against Apache Kafka 4.1)."""
import pytest

import streamkit as sk
from streamkit.transport.auth_errors import explain

CONF = sk.App("auth", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice", sasl_password="pw").conf


@pytest.mark.parametrize("said, expected", [
    ("SaslAuthenticationFailed: [Error 58] SaslAuthenticationFailed: Authentication failed: Invalid username or password",
     "SASL authentication failed (user 'alice', mechanism SCRAM-SHA-512): check sasl_username and sasl_password"),
    ("FAIL [rdkafka#producer-1] [thrd:sasl_plaintext://127.0.0.1:29392/bootstrap]: SASL authentication error: "
     "Authentication failed: Invalid username or password (after 301ms in state AUTH_REQ)",
     "SASL authentication failed"),
    ("UnsupportedSaslMechanismError: [Error 33] UnsupportedSaslMechanismError: <AIOKafkaConnection>",
     "the broker does not enable sasl_mechanism='SCRAM-SHA-512': set sasl_mechanism"),
    ("SASL SCRAM-SHA-512 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported "
     "mechanisms: PLAIN (after 301ms in state AUTH_HANDSHAKE)", "(it enables PLAIN)"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate",
     "the broker's TLS certificate is not trusted: set ssl_cafile"),
    ("ssl.key.location failed: error:1C800064:Provider routines::bad decrypt", "set ssl_password"),
])
def test_client_errors_become_the_cause_and_the_fix(said, expected):
    assert expected in (explain(said, CONF) or "")


@pytest.mark.parametrize("said", ["KafkaConnectionError: Unable to bootstrap", "Connection refused", "TimeoutError()"])
def test_network_problems_are_left_to_the_retry(said):
    assert explain(said, CONF) is None


async def test_an_unreachable_broker_on_confluent_says_why():
    """librdkafka's timeout says nothing (it ended in ``TimeoutError: ``): its own log line does."""
    from streamkit.runtime.topic_admin import connect_admin
    from streamkit.transport import create_driver

    settings = sk.Settings(broker="127.0.0.1:1", driver="confluent")
    with pytest.raises(sk.BrokerUnavailable) as caught:
        await connect_admin(create_driver(settings), settings.bootstrap_servers, 1.0)
    assert "Connection refused" in str(caught.value), caught.value


MTLS = sk.App("mtls", ssl_cafile="/ca.pem", ssl_certfile="/client.pem", ssl_keyfile="/client.key").conf
NO_CERT = sk.App("tls", ssl_cafile="/ca.pem").conf


@pytest.mark.parametrize("conf, said, expected", [  # texts seen against Apache Kafka 4.1 (ssl.client.auth=required)
    (NO_CERT, "Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate: SSL alert number 42 "
     "(after 1ms in state APIVERSION_QUERY)", "the broker requires a client certificate: set ssl_certfile"),
    (NO_CERT, "[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate (_ssl.c:2580)",
     "the broker requires a client certificate"),
    (MTLS, "Receive failed: error:0A000416:SSL routines::ssl/tls alert certificate unknown: SSL alert number 46",
     "the broker refused the client certificate ssl_certfile='/client.pem'"),
    (MTLS, "[SSL: SSLV3_ALERT_CERTIFICATE_UNKNOWN] sslv3 alert certificate unknown (_ssl.c:2580)",
     "the broker refused the client certificate"),
])
def test_a_client_certificate_the_broker_refuses_is_named(conf, said, expected):
    assert expected in (explain(said, conf) or "")


def test_a_refused_oauthbearer_token_is_not_called_a_password_problem():
    conf = sk.App("oauth", sasl_mechanism="OAUTHBEARER", sasl_oauth_token=lambda: ("t", 2e9)).conf
    said = "SASL authentication error: Authentication failed during authentication due to invalid credentials"
    assert explain(said, conf).startswith("the broker rejected the OAUTHBEARER token sasl_oauth_token returned")


@pytest.mark.parametrize("function, expected", [
    (lambda: ("tok", 1.0), "returned a token that expired"),
    (lambda: "tok", "must return (token, expiry as epoch seconds), not a str"),
    (lambda: 1 / 0, "failed: ZeroDivisionError: division by zero"),
    (lambda: ("tok", 4e9), None),
])
def test_a_token_function_that_gives_no_usable_token_is_named(function, expected):
    from streamkit.transport.auth_errors import oauth_token_fault

    conf = sk.App("oauth-fault", sasl_mechanism="OAUTHBEARER", sasl_oauth_token=function).conf
    fault = oauth_token_fault(conf)
    assert (fault is None) if expected is None else (expected in fault and fault.startswith("sasl_oauth_token (")), fault


async def test_a_tls_listener_spoken_to_in_plaintext_is_named(tmp_path):
    """A TLS server on loopback (a certificate the test makes) and settings without TLS."""
    import asyncio
    import ssl

    from streamkit.transport.auth_errors import speaks_tls_fault
    from tests.unit.transport.test_tls_settings import make_ca

    make_ca(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "ca.pem", tmp_path / "ca.key")
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=context)
    plain = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    async with server, plain:
        port, plain_port = server.sockets[0].getsockname()[1], plain.sockets[0].getsockname()[1]
        conf = sk.App("plain", broker=f"127.0.0.1:{port}", sasl_mechanism="PLAIN", sasl_username="u",
                      sasl_password="p").conf
        assert (await speaks_tls_fault(conf)).startswith("the broker's listener speaks TLS but security_protocol is "
                                                         "SASL_PLAINTEXT: set security_protocol to SASL_SSL")
        assert await speaks_tls_fault(sk.App("plain2", broker=f"127.0.0.1:{plain_port}").conf) is None


def test_librdkafka_lines_differing_only_in_numbers_are_rate_limited():
    import logging

    from streamkit.transport.quiet import RateLimitFilter

    limiter = RateLimitFilter(level=logging.INFO, by_text=True)
    lines = [f"FAIL [rdkafka#producer-1]: Disconnected (after {ms}ms in state APIVERSION_QUERY)" for ms in (1, 3, 0)]
    passed = [limiter.filter(logging.LogRecord("streamkit.librdkafka", logging.INFO, "", 0, line, None, None))
              for line in lines]
    assert passed == [True, False, False]


def test_librdkafka_critical_lines_are_logged_at_error(caplog):
    """streamkit names a fatal client error itself in one line: librdkafka's CRITICAL TXNERR and
    FATAL lines would repeat it even at ``-l critical``."""
    import logging

    from streamkit.transport.auth_errors import librdkafka_logger

    with caplog.at_level(logging.DEBUG, logger="streamkit.librdkafka"):
        librdkafka_logger.log(logging.CRITICAL, "%s [%s] %s", "FATAL", "rdkafka#producer-1", "Fatal error: boom")
        librdkafka_logger.log(logging.WARNING, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "connect failed")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, "FATAL [rdkafka#producer-1] Fatal error: boom"),
        (logging.WARNING, "FAIL [rdkafka#producer-1] connect failed")]


def test_a_missing_write_acl_is_found_inside_a_rolled_back_checkpoint():
    """The checkpoint's error carries the refusal only inside its failed deliveries (aiokafka) or
    in librdkafka's ADDPARTS line (confluent): both name the topic."""
    from aiokafka.errors import TopicAuthorizationFailedError

    from streamkit.errors import TransactionAborted
    from streamkit.settings import Settings
    from streamkit.transport.auth_errors import refusal_in
    from streamkit.transport.pending import delivery_failed

    settings = Settings(sasl_username="alice")
    failed = delivery_failed([TopicAuthorizationFailedError({"big-orders"})], ["big-orders"])
    try:
        try:
            raise failed
        except Exception as exc:
            raise TransactionAborted("1 transaction(s) rolled back") from exc
    except TransactionAborted as rolled_back:
        assert "big-orders" in refusal_in(rolled_back, settings)
    librdkafka = TransactionAborted('Unable to produce message: Local: Erroneous state; the transaction had failed: '
                                    'ADDPARTS [rdkafka#producer-2] [thrd:main]: TxnCoordinator/1: Failed to add '
                                    'partition "big-orders" [1] to transaction: Broker: Topic authorization failed')
    assert refusal_in(librdkafka, settings) == (
        "the broker refused User:alice access to topic 'big-orders' (no ACL allows it): grant the ACLs "
        "`streamkit acls -A <module:app>` prints")
    assert refusal_in(TransactionAborted("Can't send messages while not in transaction"), settings) is None
