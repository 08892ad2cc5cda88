"""The test helpers' and capability probes' own clients connect as the app does: an address from
STREAMKIT_TEST_BROKER plus the STREAMKIT_* TLS/SASL settings, or an app's settings (issue 20:
they took only an address, so a secured broker could not be used)."""
from __future__ import annotations

from typing import Any

import pytest

import streamkit as sk
from streamkit.testing import capabilities as probes
from streamkit.testing import helpers

SASL_ENV = {"STREAMKIT_SASL_MECHANISM": "SCRAM-SHA-512", "STREAMKIT_SASL_USERNAME": "probe-user",
            "STREAMKIT_SASL_PASSWORD": "probe-pw", "STREAMKIT_SECURITY_PROTOCOL": "ssl"}
SECURED = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
           "sasl.username": "probe-user", "sasl.password": "probe-pw"}


class Recorded:
    """Stands for a confluent client: remembers the config it was built with, reads nothing."""

    configs: list[dict[str, Any]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        Recorded.configs.append(conf)

    def __getattr__(self, _name: str) -> Any:
        return lambda *args, **kwargs: []

    def create_topics(self, topics: Any) -> Any:
        done = type("Done", (), {"result": lambda self, timeout: None})()
        return type("Futures", (), {"__getitem__": lambda self, name: done})()

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return 0, 0

    def offsets_for_times(self, tps: Any, timeout: float) -> Any:
        return [type("TP", (), {"offset": 0})()]


class _Metadata:
    def list_topics(self, topic: str, timeout: float) -> Any:
        partition = type("P", (), {})()
        return type("M", (), {"topics": {topic: type("T", (), {"partitions": {0: partition}})()}})()


@pytest.fixture
def recorded(monkeypatch):
    Recorded.configs = []
    for name, value in SASL_ENV.items():
        monkeypatch.setenv(name, value)
    return Recorded.configs


def _secured(conf: dict[str, Any]) -> bool:
    return all(conf.get(key) == value for key, value in SECURED.items())


def test_read_topic_from_an_address_takes_the_streamkit_security_settings(monkeypatch, recorded):
    monkeypatch.setattr(helpers, "AdminClient", lambda conf: (recorded.append(conf), _Metadata())[1])
    monkeypatch.setattr(helpers, "Consumer", Recorded)
    assert helpers.read_topic("127.0.0.1:1", "t", timeout=0.1, idle=0.0) == []
    assert len(recorded) == 2 and all(_secured(conf) for conf in recorded), recorded


def test_read_topic_from_an_app_takes_its_settings(monkeypatch):
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(helpers, "AdminClient", lambda conf: (seen.append(conf), _Metadata())[1])
    monkeypatch.setattr(helpers, "Consumer", lambda conf: (seen.append(conf), Recorded(conf))[1])
    app = sk.App("reader", broker="10.0.0.9:9094", ssl_cafile="/ca.pem", ssl_password="key-pw")
    helpers.read_topic(app.conf, "t", timeout=0.1, idle=0.0)
    assert [c["bootstrap.servers"] for c in seen] == ["10.0.0.9:9094"] * 2
    assert all(c["security.protocol"] == "ssl" and c["ssl.key.password"] == "key-pw" for c in seen)


def test_the_confluent_probes_take_the_streamkit_security_settings(monkeypatch, recorded):
    monkeypatch.setattr(probes, "AdminClient", Recorded)
    monkeypatch.setattr(probes, "Producer", Recorded)
    monkeypatch.setattr(probes, "Consumer", Recorded)
    monkeypatch.setattr(probes, "NewTopic", lambda *a: None)
    caps = probes.Capabilities("127.0.0.1:1")
    for name in ("read_committed_hides_aborted", "end_offsets_exact"):
        caps.check(name)  # the fakes read nothing: only the configs count
    assert caps.results["end_offsets_exact"][0] is False, caps.results  # ran to its end
    # admin, transactional producer, reader; admin, producer, consumer
    assert len(recorded) == 6 and all(_secured(conf) for conf in recorded), recorded


def test_the_aiokafka_probe_takes_the_streamkit_security_settings(monkeypatch, recorded):
    import aiokafka

    built: list[dict[str, Any]] = []

    class Producer:
        def __init__(self, **opts: Any) -> None:
            built.append(opts)

        async def start(self) -> None:
            pass

        async def stop(self) -> None:
            pass

    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", Producer)
    assert probes.Capabilities("127.0.0.1:1").check("aiokafka_transactions")[0] is True
    (opts,) = built
    assert opts["security_protocol"] == "SASL_SSL" and opts["sasl_plain_password"] == "probe-pw"
    assert opts["bootstrap_servers"] == "127.0.0.1:1" and opts["transactional_id"].startswith("probe-")


def test_the_benchmarks_clients_take_the_streamkit_security_settings(monkeypatch, recorded):
    import sys
    from pathlib import Path

    import confluent_kafka
    from confluent_kafka import admin

    class Producer(Recorded):
        def flush(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(confluent_kafka, "Producer", Producer)
    monkeypatch.setattr(admin, "AdminClient", Recorded)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[3] / "benchmarks"))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import common

    common.admin_client("127.0.0.1:1")
    common.produce_all("127.0.0.1:1", "t", [(b"k", b"v")], "records", **{"linger.ms": 7})
    assert len(recorded) == 2 and all(_secured(conf) for conf in recorded), recorded
    assert recorded[1]["linger.ms"] == 7 and recorded[1]["partitioner"] == "murmur2_random"
