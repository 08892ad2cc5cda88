"""A sample app for ``streamkit acls``: a source re-keyed through a repartition topic into a
table, a sink, exactly-once (tests/unit/cli/test_acls_command.py, and on a broker with an authorizer
tests/integration/test_security_acls.py)."""
import os

import streamkit as sk

PREFIX = os.environ.get("ACL_PREFIX", "")  # a fresh app and topics per run on a real broker
app = sk.App(f"{PREFIX}acl-demo", broker="kafka.example:9093", processing_guarantee="exactly_once",
             sasl_mechanism="SCRAM-SHA-512", sasl_username="alice", sasl_password="alice-secret")
orders = app.topic(f"{PREFIX}orders", key_type=str, value_type=int, partitions=2)
large = app.topic(f"{PREFIX}large-orders", key_type=str, value_type=int, partitions=2)
totals = app.Table("totals", default=int, partitions=2)


@app.agent(orders, sink=[large])
async def keep(stream):
    """Totals per user; orders of 100 or more go on."""
    async for user, amount in stream.group_by(lambda amount: "u", name="by-user").items():
        totals[user] += amount
        if amount >= 100:
            yield amount
