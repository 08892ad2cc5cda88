# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from streamkit import Settings
from streamkit.errors import ConfigurationError
from streamkit.transport.partitioner import partition_for_key
from streamkit.transport.security import aiokafka_common, confluent_common


@given(st.binary(max_size=64), st.integers(1, 64))
def test_partition_matches_kafka_python_default(key, partitions):
    assert partition_for_key(key, partitions) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def test_known_java_partition():
    # Java's DefaultPartitioner puts b"foobar" in partition 3 of 10 (murmur2 = -790332482).
    assert partition_for_key(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10


def test_env_overrides_code_values():
    s = Settings.from_env({"STREAMKIT_DRIVER": "confluent", "STREAMKIT_COMMIT_INTERVAL": "0.5",
                           "STREAMKIT_CONSUMER_CONFIG": '{"fetch.min.bytes": 1}'}, driver="aiokafka")
    assert s.driver == "confluent" and s.commit_interval == 0.5 and s.consumer_config == {"fetch.min.bytes": 1}


@pytest.mark.parametrize("values, fragment", [
    ({"driver": "kafka-go"}, "driver"),
    ({"error_policy": "ignore"}, "error_policy"),
    ({"processing_guarantee": "exactly-once"}, "processing_guarantee"),
    ({"processing_guarantee": "exactly_once", "transaction_producer": "worker"}, "aiokafka cannot"),
    ({"processing_guarantee": "exactly_once", "transaction_timeout_ms": 1500}, "transaction_timeout_ms"),
    ({"transaction_producer": "task"}, "transaction_producer"),
    ({"compression": "brotli"}, "compression"),
    ({"no_such": 1}, "unknown setting"),
])
def test_invalid_settings_are_rejected_up_front(values, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        Settings.from_env({}, **values)


def test_exactly_once_picks_the_transactional_producer_per_driver():
    assert Settings(processing_guarantee="exactly_once").transactions_per_partition  # aiokafka: EOS v1
    eos = Settings(processing_guarantee="exactly_once", driver="confluent")
    assert not eos.transactions_per_partition and eos.isolation_level == "read_committed"
    assert Settings().isolation_level == "read_uncommitted"


def test_broker_url_and_security_translation():
    s = Settings(broker="kafka://a:1, kafka://b:2", sasl_mechanism="SCRAM-SHA-512", sasl_username="u",
                 sasl_password="p", compression="zstd")
    assert s.bootstrap_servers == "a:1,b:2"
    conf = confluent_common(s)
    assert conf["security.protocol"] == "sasl_plaintext" and conf["sasl.mechanism"] == "SCRAM-SHA-512"
    opts = aiokafka_common(s)
    assert opts["security_protocol"] == "SASL_PLAINTEXT" and opts["sasl_plain_username"] == "u"


def test_ssl_settings_reach_both_clients(tmp_path):
    import ssl
    import subprocess

    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
    s = Settings(ssl_cafile=str(cert), ssl_certfile=str(cert), ssl_keyfile=str(key))
    assert s.effective_security_protocol == "SSL"
    assert confluent_common(s)["ssl.ca.location"] == str(cert)
    assert isinstance(aiokafka_common(s)["ssl_context"], ssl.SSLContext)


def test_gc_tuning_is_held_while_any_worker_runs_and_restored_after_the_last():
    import gc

    from streamkit.runtime import gc_tuning

    before = gc.get_threshold()
    gc_tuning.acquire(before[0] + 1000)
    gc_tuning.acquire(before[0] + 1000)  # a second app in the same process
    assert gc.get_threshold()[0] == before[0] + 1000
    assert gc.get_freeze_count() > 0
    gc_tuning.release(before[0] + 1000)
    assert gc.get_threshold()[0] == before[0] + 1000  # the other app still runs
    gc_tuning.release(before[0] + 1000)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    gc_tuning.acquire(0)  # 0 leaves the collector alone
    assert gc.get_threshold() == before


def test_memoised_partitioner_places_keys_like_aiokafkas_default():
    from aiokafka.partitioner import DefaultPartitioner

    from streamkit.transport.partitioner import default_partitioner, partition_for_key

    for i in range(2000):
        key = f"user-{i}".encode()
        for n in (1, 3, 4, 12):
            assert default_partitioner(key, list(range(n)), []) == DefaultPartitioner()(key, list(range(n)), [])
            assert partition_for_key(key, n) == DefaultPartitioner()(key, list(range(n)), [])
    assert default_partitioner(None, [0, 1, 2], [2]) == 2  # keyless: an available partition


def test_keys_are_hashed_by_librdkafka_with_the_gil_held():
    """The confluent-kafka wheel bundles librdkafka: its murmur2 places keys (not the 2.5 µs
    pure-Python port), and the same as Java for every key tried above."""
    from streamkit.transport import partitioner

    assert partitioner._partition is not partitioner._python_partition
    for key in (b"", b"a", b"user-1", b"\x00\xff" * 9):
        assert partitioner._partition(key, 7) == partitioner._python_partition(key, 7)
