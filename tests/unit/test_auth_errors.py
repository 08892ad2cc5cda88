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
