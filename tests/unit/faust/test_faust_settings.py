"""Faust's setting names (faust-streaming 0.11): a Faust app's ``faust.App(...)`` keywords run with
the import changed, each renamed with its units, accepted where it is what streamkit does, or
refused with what to do instead; app-level ones (version, timezone, serializers, autodiscover,
logging) are honoured."""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import sys
import uuid

import pytest

import streamkit as faust  # as a Faust app would import it
from streamkit.errors import ConfigurationError
from streamkit.faust.settings import FAUST_SETTINGS as ALL_FAUST_SETTINGS
from streamkit.faust.settings import ONLY, REFUSED, RENAMED, TIMING
from streamkit.settings import Settings
from streamkit.testing import wait_for
from tests.helpers import collected

FAUST_SETTINGS = sorted(ALL_FAUST_SETTINGS)  # faust-streaming 0.11's, kept in streamkit/faust/settings.py
FIELDS = {f.name for f in dataclasses.fields(Settings)}


def memory_app(**settings):
    name = f"fs-{uuid.uuid4().hex[:6]}"
    return faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                     **settings)


def test_every_faust_setting_is_known_to_streamkit():
    unknown = [n for n in FAUST_SETTINGS
               if n not in FIELDS and n not in RENAMED and n not in ONLY and n not in TIMING and n not in REFUSED]
    assert unknown == []


def test_a_faust_app_s_settings_take_effect_with_streamkit_s_names_and_units(tmp_path):
    app = faust.App("orders", broker="kafka://localhost:9092", datadir=str(tmp_path), broker_commit_interval=2.5,
                    broker_session_timeout=dt.timedelta(seconds=30), broker_heartbeat_interval=3.0,
                    broker_max_poll_interval=600, broker_max_poll_records=500, consumer_auto_offset_reset="latest",
                    topic_replication_factor=3, producer_acks=-1, producer_linger=0.01,
                    producer_compression_type="lz4", web_bind="0.0.0.0", canonical_url="http://w1:6066",
                    stream_wait_empty=True, topic_allow_declare=True, debug=False)
    conf = app.conf
    assert (conf.data_dir, conf.commit_interval, conf.session_timeout_ms, conf.heartbeat_interval_ms) == (
        str(tmp_path), 2.5, 30_000, 3_000)
    assert (conf.max_poll_interval_ms, conf.fetch_max_records, conf.auto_offset_reset, conf.topic_replicas) == (
        600_000, 500, "latest", 3)
    assert (conf.acks, conf.linger_ms, conf.compression, conf.web_host, conf.web_advertised_url) == (
        "all", 10, "lz4", "0.0.0.0", "http://w1:6066")
    app.conf.broker_commit_interval = 5  # app.conf takes Faust's names too
    assert app.conf.commit_interval == 5.0


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_faust_settings_streamkit_does_not_honour_are_refused_with_what_to_do(name):
    with pytest.raises(ConfigurationError, match=f"Faust setting '{name}' is not supported by streamkit: .+"):
        faust.App("x", **{name: "anything"})
    with pytest.raises(ConfigurationError, match=f"'{name}'"):
        setattr(faust.App("x").conf, name, "anything")


@pytest.mark.parametrize("name", sorted(ONLY))
def test_faust_settings_are_accepted_only_with_the_value_streamkit_honours(name):
    accepted, _why = ONLY[name]
    faust.App("x", **{name: accepted[0]})
    with pytest.raises(ConfigurationError, match=f"{name}=.* is not supported: .+"):
        faust.App("x", **{name: "something else"})


def test_table_cleanup_interval_only_tunes_timing_so_it_is_accepted_saying_what_streamkit_does(caplog):
    caplog.set_level(logging.INFO, logger="streamkit.app")
    app = faust.App("x", table_cleanup_interval=1.0)
    app.conf.table_cleanup_interval = dt.timedelta(seconds=2)  # as Faust's windowed_aggregation.py sets it
    said = [r.getMessage() for r in caplog.records if "table_cleanup_interval" in r.getMessage()]
    assert len(said) == 2 and all("every checkpoint" in s for s in said)
    with pytest.raises(ConfigurationError, match="table_cleanup_interval=-1.*seconds"):
        faust.App("x", table_cleanup_interval=-1)
    with pytest.raises(ConfigurationError, match="table_cleanup_interval='soon'"):
        faust.App("x", table_cleanup_interval="soon")


def test_a_faust_name_and_the_streamkit_name_must_agree():
    assert faust.App("x", datadir="d", data_dir="d").conf.data_dir == "d"
    with pytest.raises(ConfigurationError, match="datadir='a'.*contradicts data_dir='b'"):
        faust.App("x", datadir="a", data_dir="b")


def test_version_names_a_new_consumer_group_and_topics_as_in_faust():
    app = faust.App("orders", version=2)
    assert app.id == "orders-v2" and app.leader_topic.name == "orders-v2-__leader"
    assert faust.App("orders", version=3, id_format="{id}-{self.version}").id == "orders-3"
    assert faust.App("orders").id == "orders"


async def test_version_changed_after_the_app_named_its_topics_is_refused_at_start():
    app = memory_app()
    app.conf.version = 2
    with pytest.raises(ConfigurationError, match="pass version="):
        await app.start()


async def test_value_and_key_serializer_are_the_defaults_of_untyped_topics():
    app = memory_app(value_serializer="raw", key_serializer="str")
    raw = app.topic("raw-values")
    seen = collected(app, raw)

    async with app.running():
        await raw.send(key="k", value=b"\x00\x01 not json")
        await wait_for(lambda: seen, 10, message="the raw record")
    assert seen == [("k", b"\x00\x01 not json")]
    with pytest.raises(ConfigurationError, match="unknown serializer 'yaml'"):
        memory_app(value_serializer="yaml").topic("t")


async def test_timezone_is_the_default_of_crontabs_declared_without_one():
    app = memory_app(timezone="Europe/Paris")

    @app.crontab("0 9 * * *")
    async def morning():
        pass

    @app.crontab("0 9 * * *", timezone="UTC")
    async def utc_morning():
        pass

    async with app.running():
        assert str(app.timers[0].tz) == "Europe/Paris" and str(app.timers[1].tz) == "UTC"


async def test_autodiscover_imports_every_module_of_the_listed_packages(tmp_path, monkeypatch):
    package = f"discovered_{uuid.uuid4().hex[:6]}"
    (tmp_path / package / "sub").mkdir(parents=True)
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "sub" / "__init__.py").write_text("")
    (tmp_path / package / "sub" / "agents.py").write_text("IMPORTED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    app = memory_app(autodiscover=[package])
    async with app.running():
        assert sys.modules[f"{package}.sub.agents"].IMPORTED
    with pytest.raises(ConfigurationError, match="autodiscover=True needs origin="):
        async with memory_app(autodiscover=True).running():
            pass


async def test_logging_config_and_loghandlers_apply_when_the_worker_starts():
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    # incremental: keeps pytest's handlers
    config = {"version": 1, "incremental": True, "loggers": {"streamkit.faust-test": {"level": "INFO"}}}
    app = memory_app(logging_config=config, loghandlers=[handler])
    try:
        async with app.running():
            logging.getLogger("streamkit.faust-test").info("through the configured logger")
    finally:
        logging.getLogger().removeHandler(handler)
    assert any(r.getMessage() == "through the configured logger" for r in records)


def test_faust_environment_variables_apply_over_keywords_and_streamkit_s_over_them():
    environ = {"BROKER_URL": "kafka://broker-a:9093", "APP_DATADIR": "/srv/data", "BROKER_COMMIT_INTERVAL": "2.5",
               "WEB_PORT": "7000", "STREAMKIT_WEB_PORT": "7001", "STREAM_WAIT_EMPTY": "true"}
    conf = Settings.from_env(environ, data_dir="/code/default", commit_interval=9.0)
    assert (conf.bootstrap_servers, conf.data_dir, conf.commit_interval, conf.web_port) == (
        "broker-a:9093", "/srv/data", 2.5, 7001)
    with pytest.raises(ConfigurationError, match="environment variable APP_DEBUG='true': debug=True is not supported"):
        Settings.from_env({"APP_DEBUG": "true"})
