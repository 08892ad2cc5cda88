"""Settings as Faust users set them: app.conf assignments that take effect or fail, Faust's broker
URL forms, and typos refused with a suggestion (never accepted and ignored)."""
from __future__ import annotations

import uuid

import pytest

import streamkit as sk
from streamkit.tables.stores import MemoryStore


@pytest.mark.parametrize("broker, servers", [
    ("aiokafka://", "localhost:9092"),
    ("kafka://", "localhost:9092"),
    ("kafka://a", "a:9092"),
    ("kafka://a:9093;b:9094", "a:9093,b:9094"),
    ("kafka://a:9093,kafka://b", "a:9093,b:9092"),
    (["kafka://a:1", "b:2"], "a:1,b:2"),
    ("127.0.0.1:29092", "127.0.0.1:29092"),
])
def test_faust_broker_url_forms(broker, servers):
    assert sk.App("urls", broker=broker).conf.bootstrap_servers == servers


def test_the_confluent_scheme_picks_the_confluent_driver_unless_driver_is_set():
    assert sk.App("c1", broker="confluent://h:1").conf.driver == "confluent"
    assert sk.App("c2", broker="confluent://h:1", driver="aiokafka").conf.driver == "aiokafka"


def test_typos_are_refused_with_a_suggestion():
    app = sk.App("typos")
    with pytest.raises(
        sk.ConfigurationError, match=r"unknown setting 'comit_interval' \(did you mean 'commit_interval'\?\)"
    ):
        app.conf.comit_interval = 2.0
    with pytest.raises(sk.ConfigurationError, match=r"did you mean 'table_standby_replicas'"):
        sk.App("typos2", table_standby_replica=1)
    with pytest.raises(sk.ConfigurationError, match="driver='nope'"):
        app.conf.driver = "nope"
    assert app.conf.driver == "aiokafka"  # a refused value leaves the setting as it was


async def test_conf_set_after_the_table_applies_and_is_fixed_while_running(tmp_path):
    name = f"conf-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(tmp_path))
    counts = app.Table("counts", default=int)
    source = app.topic("words", partitions=2)

    @app.agent(source)
    async def count(stream):
        async for word in stream:
            counts[word] += 1

    app.conf.store = "memory://"  # after the table, as Faust test suites do
    async with app.running():
        assert counts.store_url == "memory://"
        assert all(isinstance(s, MemoryStore) for s in app.runtime.tables.stores.values())
        with pytest.raises(sk.ConfigurationError, match="the worker has started"):
            app.conf.commit_interval = 5.0
    app.conf.commit_interval = 5.0  # stopped: settings may change again
    assert not list(tmp_path.rglob("*.sst")) and not list(tmp_path.rglob("CURRENT")), "a RocksDB store was opened"


def test_choice_settings_are_typed_and_strings_still_work():
    by_enum = sk.App(
        "enums",
        processing_guarantee=sk.Guarantee.EXACTLY_ONCE,
        driver=sk.DriverName.CONFLUENT,
        error_policy=sk.ErrorPolicyName.SKIP,
    )
    by_string = sk.App("strings", processing_guarantee="exactly_once", driver="confluent", error_policy="skip")
    for conf in (by_enum.conf, by_string.conf):
        assert conf.processing_guarantee is sk.Guarantee.EXACTLY_ONCE and conf.exactly_once
        assert conf.driver is sk.DriverName.CONFLUENT and conf.error_policy == "skip"
    with pytest.raises(sk.ConfigurationError, match="error_policy='retry': expected one of dlq, skip, stop"):
        sk.App("bad", error_policy="retry")


def test_faust_setting_names_are_renamed_and_typos_get_did_you_mean_as_docs_say():
    assert sk.App("faustnames", datadir="/tmp/x").conf.data_dir == "/tmp/x"  # test_faust_settings.py: all of them
    with pytest.raises(sk.ConfigurationError, match=r"unknown setting\(s\): 'datadri' \(did you mean 'data_dir'\?\)"):
        sk.App("faustnames", datadri="/tmp/x")
