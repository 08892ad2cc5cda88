"""Every setting is type-checked where it is given: App(...), app.conf, STREAMKIT_*, CLI options.
A value of the wrong type (``commit_interval="soon"``) once passed and killed the commit loop
silently at its first sleep; now it is refused at once, naming the setting, value and type."""
from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

import streamkit as sk
from streamkit import env_names
from streamkit.settings import Settings


def test_app_refuses_a_badly_typed_number():
    with pytest.raises(sk.ConfigurationError, match=r"commit_interval='soon'.*number"):
        sk.App("types1", commit_interval="soon")


def test_conf_assignment_refuses_a_badly_typed_number_and_keeps_the_old_value():
    app = sk.App("types2")
    with pytest.raises(sk.ConfigurationError, match=r"commit_interval='soon'.*number"):
        app.conf.commit_interval = "soon"
    assert app.conf.commit_interval == 1.0


def test_environment_refuses_a_badly_typed_number():
    with pytest.raises(sk.ConfigurationError, match="STREAMKIT_COMMIT_INTERVAL='soon'"):
        Settings.from_env({"STREAMKIT_COMMIT_INTERVAL": "soon"})


def test_faust_names_go_through_the_same_checks():
    with pytest.raises(sk.ConfigurationError, match="broker_commit_interval='soon'"):
        sk.App("types3", broker_commit_interval="soon")
    app = sk.App("types4")
    with pytest.raises(sk.ConfigurationError, match="broker_commit_interval='soon'"):
        app.conf.broker_commit_interval = "soon"


def test_faust_text_settings_refuse_what_is_not_text():
    with pytest.raises(sk.ConfigurationError, match=r"web_bind=None \(Faust's name for web_host\).*expected text"):
        sk.App("types14", web_bind=None)
    assert sk.App("types15", datadir=Path("/tmp/x")).conf.data_dir == "/tmp/x"


def test_numeric_text_is_converted_as_the_environment_converts_it():
    conf = sk.App("types5", commit_interval="5", web_port="6070", session_timeout_ms=12000.0).conf
    assert conf.commit_interval == 5.0 and type(conf.commit_interval) is float
    assert conf.web_port == 6070 and type(conf.web_port) is int
    assert conf.session_timeout_ms == 12000 and type(conf.session_timeout_ms) is int
    conf.commit_interval = timedelta(milliseconds=250)
    assert conf.commit_interval == 0.25


@pytest.mark.parametrize("name, value, expected", [
    ("web_port", "6066x", "an integer"),
    ("web_port", 6066.5, "an integer"),
    ("web_port", True, "an integer"),
    ("commit_interval", None, "a number"),
    ("commit_interval", False, "a number"),
    ("web_enabled", "maybe", "true or false"),
    ("web_enabled", 2, "true or false"),
    ("web_host", 127, "a string"),
    ("consumer_config", ["a"], "a dict"),
    ("loghandlers", "h", "a list"),
    ("autodiscover", 5, "true, false or a list"),
])
def test_wrong_types_are_refused_naming_setting_and_type(name, value, expected):
    said = rf"{name}(=.*)?: expected {expected}"  # a dict (native config) is not repeated: it may hold secrets
    with pytest.raises(sk.ConfigurationError, match=said):
        sk.App("types6", **{name: value})
    app = sk.App("types7")
    before = getattr(app.conf, name)
    with pytest.raises(sk.ConfigurationError, match=said):
        setattr(app.conf, name, value)
    assert getattr(app.conf, name) == before


def test_autodiscover_takes_a_flag_or_package_names_in_any_form():
    assert sk.App("types11", autodiscover="yes").conf.autodiscover is True
    assert sk.App("types12", autodiscover="pkg_a, pkg_b").conf.autodiscover == ["pkg_a", "pkg_b"]
    assert Settings.from_env({"STREAMKIT_AUTODISCOVER": "pkg_a"}).autodiscover == ["pkg_a"]
    assert sk.App("types13", autodiscover=("pkg_a",)).conf.autodiscover == ["pkg_a"]


def test_booleans_in_words_are_accepted_and_unknown_words_refused_everywhere():
    assert sk.App("types8", web_enabled="off").conf.web_enabled is False
    assert Settings.from_env({"STREAMKIT_WEB_ENABLED": "yes"}).web_enabled is True
    with pytest.raises(sk.ConfigurationError, match="STREAMKIT_WEB_ENABLED='ture'"):
        Settings.from_env({"STREAMKIT_WEB_ENABLED": "ture"})


def test_a_secret_of_the_wrong_type_is_refused_without_echoing_it():
    with pytest.raises(sk.ConfigurationError, match="sasl_password") as caught:
        sk.App("types9", sasl_password=123456789)
    assert "123456789" not in str(caught.value)


def test_a_broker_list_assigned_to_conf_is_joined():
    app = sk.App("types10")
    app.conf.broker = ["kafka://a:1", "b:2"]
    assert app.conf.bootstrap_servers == "a:1,b:2"


def test_a_typo_in_a_streamkit_variable_is_warned_about_once(caplog, monkeypatch):
    monkeypatch.setattr(env_names, "_warned", set())  # once per process: this test's process
    environ = {"STREAMKIT_COMIT_INTERVAL": "2", "STREAMKIT_TEST_BROKER": "x", "STREAMKIT_TOPIC_PARTITIONS": "3",
               "STREAMKIT_BROKER": "h:1"}
    with caplog.at_level(logging.WARNING, logger="streamkit.settings"):
        Settings.from_env(environ)
        Settings.from_env(environ)
    lines = [r.getMessage() for r in caplog.records if r.name == "streamkit.settings"]
    assert len(lines) == 1, lines
    assert "STREAMKIT_COMIT_INTERVAL" in lines[0] and "did you mean STREAMKIT_COMMIT_INTERVAL" in lines[0]


def test_every_streamkit_variable_the_project_reads_is_known():
    """No variable streamkit or its tests read is warned about (grep: STREAMKIT_TEST_*, Spark's)."""
    environ = {name: "1" for name in ("STREAMKIT_TEST_BROKER", "STREAMKIT_TEST_BROKER_PID", "STREAMKIT_TEST_KAFKA_BIN",
                                      "STREAMKIT_TEST_SASL_BROKER", "STREAMKIT_TEST_KEEP_TOPICS",
                                      "STREAMKIT_SPARK_SHUFFLE_PARTITIONS", "STREAMKIT_TOPIC_PARTITIONS")}
    assert env_names.warn_unknown(environ, ["topic_partitions"]) == []
    assert env_names.warn_unknown({"STREAMKIT_NOT_A_SETTING": "1"}, ["topic_partitions"]) == ["STREAMKIT_NOT_A_SETTING"]
