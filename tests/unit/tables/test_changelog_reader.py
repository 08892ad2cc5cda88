# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Which client reads changelogs (restores, standbys, global tables) on each driver.

aiokafka's fetch parsing bounded its restores at ~0.35 of librdkafka's raw consume rate; the
aiokafka driver reads changelogs with librdkafka (confluent-kafka is a dependency), given the
same connection, security and isolation settings as every other client of the worker.
"""
from __future__ import annotations

import streamkit as sk
from streamkit.transport.aiokafka_driver import AiokafkaConsumer, AiokafkaDriver
from streamkit.transport.confluent_driver import ConfluentConsumer, ConfluentDriver


def test_the_aiokafka_driver_reads_changelogs_with_librdkafka_under_the_worker_s_settings():
    conf = sk.App("reader", broker="kafka://127.0.0.1:29999", sasl_mechanism="SCRAM-SHA-512", sasl_username="u",
                  sasl_password="pw-41", processing_guarantee="exactly_once").conf
    reader = AiokafkaDriver(conf).changelog_reader()
    assert isinstance(reader, ConfluentConsumer)
    native = reader._conf
    assert native["bootstrap.servers"] == "127.0.0.1:29999"
    assert (native["sasl.mechanism"], native["sasl.username"], native["sasl.password"]) == ("SCRAM-SHA-512", "u",
                                                                                          "pw-41")
    assert native["security.protocol"].lower() == "sasl_plaintext"
    assert native["isolation.level"] == "read_committed"  # an exactly-once restore skips aborted writes
    assert not reader._grouped  # assigned partitions, no group membership


async def test_aiokafka_native_consumer_settings_keep_the_changelog_reader_on_aiokafka():
    """librdkafka would refuse (or misread) aiokafka's option names."""
    conf = sk.App("reader-native", consumer_config={"fetch_max_bytes": 1 << 20}).conf
    assert isinstance(AiokafkaDriver(conf).changelog_reader(), AiokafkaConsumer)


def test_the_confluent_driver_reads_changelogs_with_its_own_consumer():
    conf = sk.App("reader-confluent", driver="confluent", consumer_config={"fetch.min.bytes": 1}).conf
    reader = ConfluentDriver(conf).changelog_reader()
    assert isinstance(reader, ConfluentConsumer) and reader._conf["fetch.min.bytes"] == 1
