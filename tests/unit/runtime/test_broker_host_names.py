"""A mistyped broker host name is one line at once, not the connect timeout's wait; loopback
names and addresses still connect as before."""
from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli
from streamkit.runtime.host_names import hosts_of

MISTYPED = "no-such-broker.invalid"  # RFC 6761: never resolves


def topics_list(broker: str, driver: str, monkeypatch) -> tuple[str, float]:
    monkeypatch.setenv("STREAMKIT_BROKER_CONNECT_TIMEOUT", "4")
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["topics", "list", "--broker", broker, "--driver", driver])
    assert result.exit_code == 2, (result.exit_code, result.output)
    return result.output.strip(), time.monotonic() - started


@pytest.mark.parametrize("driver", ["aiokafka", "confluent"])
def test_a_host_name_that_does_not_resolve_is_one_line_at_once(driver, monkeypatch):
    line, took = topics_list(f"{MISTYPED}:9092", driver, monkeypatch)
    assert line.startswith(f"streamkit: cannot resolve the Kafka broker host name in {MISTYPED}:9092 "
                           f"('{MISTYPED}': "), line
    assert "check the broker address" in line and "\n" not in line, line
    assert took < 3, took  # not the 4 s connect timeout


def test_loopback_names_are_still_tried_as_brokers(monkeypatch):
    line, _ = topics_list("localhost:1", "aiokafka", monkeypatch)
    assert line.startswith("streamkit: cannot reach the Kafka broker at localhost:1 after"), line


def test_a_bootstrap_list_is_read_as_hosts():
    assert hosts_of("a:9092, [::1]:9093,127.0.0.1:1") == [("a", "9092"), ("::1", "9093"), ("127.0.0.1", "1")]
