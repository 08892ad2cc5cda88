"""A missing ACL is one line naming the resource and the fix, exit 2, never a retry loop or a
traceback (issue 20). The texts are the clients' own (aiokafka's errors, librdkafka's codes), as
Apache Kafka 4.1 with StandardAuthorizer produced them; tests/integration/test_security_acls.py
runs the same against such a broker."""
from __future__ import annotations

from typing import Any

import pytest

import streamkit as sk
from streamkit.runtime.topic_admin import ensure_topics
from streamkit.testing import wait_for
from streamkit.transport import TopicSpec
from streamkit.transport.auth_errors import explain, refused_access

CONF = sk.Settings(sasl_mechanism="PLAIN", sasl_username="alice", sasl_password="pw")
FIX = "(no ACL allows it): grant the ACLs `streamkit acls -A <module:app>` prints"


@pytest.mark.parametrize("said, group, refused", [
    ("TopicAuthorizationFailedError [Error 29] TopicAuthorizationFailedError: orders", None, "topic 'orders'"),
    ("GroupAuthorizationFailedError [Error 30] GroupAuthorizationFailedError: payments", None, "group 'payments'"),
    ("TransactionalIdAuthorizationFailed [Error 53] TransactionalIdAuthorizationFailed: payments-worker-1", None,
     "transactional id 'payments-worker-1'"),
    ('KafkaException KafkaError{code=GROUP_AUTHORIZATION_FAILED,val=30,str="FindCoordinator response error: '
     'Group authorization failed."}', "payments", "group 'payments'"),
    ('KafkaException KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,str="Authorization failed."}', None, "a topic"),
    ("ClusterAuthorizationFailedError [Error 31] ClusterAuthorizationFailedError", None, "a cluster"),
])
def test_authorization_failures_name_the_resource(said, group, refused):
    assert refused_access(said, CONF, group=group) == f"the broker refused User:alice access to {refused} {FIX}"
    assert explain(said, CONF) is not None  # at connection time too: no retry heals it


class RefusingAdmin:
    """An admin client whose principal may describe but not create topics."""

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def describe_topics(self, names: Any = None) -> dict:
        return {}

    async def create_topics(self, specs: Any) -> None:
        raise Exception(f"[Error 29] TopicAuthorizationFailedError: {specs[0].name}")

    async def diagnose(self) -> None:
        return None


class RefusingDriver:
    name = "aiokafka"
    settings = CONF

    def admin(self) -> RefusingAdmin:
        return RefusingAdmin()


async def test_topics_the_principal_may_not_create_are_named():
    specs = [TopicSpec("orders", 1, 1, {}), TopicSpec("orders-dlq", 1, 1, {})]
    with pytest.raises(sk.ConfigurationError) as caught:
        await ensure_topics(RefusingDriver(), "127.0.0.1:9092", specs, {}, 5.0)
    assert str(caught.value) == (f"cannot create orders, orders-dlq: the broker refused User:alice access "
                                  f"to topic 'orders' {FIX}")


async def test_a_consumer_refused_its_group_halts_the_worker_with_the_fix(tmp_path):
    app = sk.App("refused", broker="memory://refused-acl", driver="memory", store="memory://", data_dir=str(tmp_path),
                 web_enabled=False, sasl_username="alice")
    app.topic("in", partitions=1)

    @app.agent(app.topic("in"))
    async def noop(stream):
        async for _ in stream:
            pass

    async with app.running():
        async def refused(*_args: Any) -> Any:
            raise Exception("[Error 30] GroupAuthorizationFailedError: refused")

        app.runtime.consumer.getmany = refused
        await wait_for(lambda: app.runtime.fatal is not None, 10, message="the worker halted")
        assert isinstance(app.runtime.fatal, sk.ConfigurationError)
        assert str(app.runtime.fatal) == f"the broker refused User:alice access to group 'refused' {FIX}"


def test_kip848_timeouts_refused_for_want_of_an_acl_say_so():
    """Seen on confluent with every ACL but the optional AlterConfigs: the hint was about broker limits."""
    from streamkit.runtime.rebalancing import refused_timeouts_message
    from streamkit.settings import Rebalancing

    message = refused_timeouts_message(["consumer.session.timeout.ms=10000 (Group authorization failed.)"],
                                       Rebalancing.AUTO)
    assert "needs AlterConfigs on its group (`streamkit acls` prints it); keeping the classic protocol" in message
    assert "group.consumer.min" not in message
