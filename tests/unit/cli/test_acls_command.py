"""``streamkit acls -A module:app`` prints exactly the ACLs a worker of the sample app needs:
its topics (source, sink, repartition, changelog, internal), its group, the transactional-id
prefix of exactly-once and idempotent writes (tests/apps/acl_app.py)."""
from __future__ import annotations

import os
import subprocess
import sys

ADD = "kafka-acls.sh --bootstrap-server kafka.example:9093 --add --allow-principal User:alice"
BOTH = "--operation Read --operation Write --operation Describe --operation Create"
EXPECTED = [
    f"{ADD} {BOTH} --topic acl-demo-__cluster",
    f"{ADD} --operation Read --operation Describe --operation Create --topic acl-demo-__leader",
    f"{ADD} --operation Write --operation Describe --operation Create --topic acl-demo-dlq",
    f"{ADD} {BOTH} --topic acl-demo-keep-by-user-repartition",
    f"{ADD} {BOTH} --topic acl-demo-replies",
    f"{ADD} {BOTH} --topic acl-demo-totals-changelog",
    f"{ADD} --operation Write --operation Describe --operation Create --topic large-orders",
    f"{ADD} --operation Read --operation Describe --operation Create --topic orders",
    "# the worker's consumer group: join, fetch and commit offsets",
    f"{ADD} --operation Read --group acl-demo",
    "# the changelog reader (librdkafka's, on aiokafka too) looks up a coordinator",
    f"{ADD} --operation Describe --group streamkit-manual- --resource-pattern-type prefixed",
    "# exactly-once transactional producers",
    f"{ADD} --operation Write --operation Describe --transactional-id acl-demo- --resource-pattern-type prefixed",
    "# idempotent producers",
    f"{ADD} --operation IdempotentWrite --cluster",
]
CONFLUENT_EXTRA = [
    "# optional: KIP-848 group timeouts (refused: the worker keeps the classic protocol)",
    f"{ADD} --operation AlterConfigs --group acl-demo",
    "# librdkafka's group-less readers (changelogs, cluster, replies) look up a coordinator",
    f"{ADD} --operation Describe --group streamkit-manual- --resource-pattern-type prefixed",
]


def acls(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkit", "acls", "-A", "tests.apps.acl_app:app", *args],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


def test_the_sample_app_s_acls_exactly():
    out = acls()
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == EXPECTED


def test_on_confluent_the_group_config_and_group_less_readers_are_added():
    out = acls("--principal", "User:alice", STREAMKIT_DRIVER="confluent")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == EXPECTED[:10] + CONFLUENT_EXTRA + EXPECTED[12:]


def test_aiokafka_native_consumer_settings_keep_the_changelog_reader_off_the_manual_groups():
    """Its changelog reader is then aiokafka's, which looks up no coordinator."""
    out = acls("--principal", "User:alice", STREAMKIT_CONSUMER_CONFIG='{"fetch_max_bytes": 1048576}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == EXPECTED[:10] + EXPECTED[12:]


def test_without_a_principal_it_is_one_line_and_exit_2():
    out = acls(STREAMKIT_SASL_MECHANISM="", STREAMKIT_SASL_USERNAME="")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["streamkit: acls needs --principal (e.g. User:CN=worker for a client "
                                       "certificate), or sasl_username in the app's settings"]
