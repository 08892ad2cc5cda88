"""Capability probes answer yes, no or unknown; unknown never passes for a missing feature."""
from __future__ import annotations

import pytest

from streamkit.testing import capabilities as probes
from streamkit.testing.capabilities import Capabilities, ProbeInconclusive
from streamkit.testing import pytest_plugin
from streamkit.testing.pytest_plugin import require_capability


@pytest.fixture
def fake_probes(monkeypatch):
    def broken(_address):
        raise ConnectionError("refused")

    def inconclusive(_address):
        raise ProbeInconclusive("the committed marker never arrived (read 0 record(s))")

    monkeypatch.setitem(probes.PROBES, "broken", broken)
    monkeypatch.setitem(probes.PROBES, "inconclusive", inconclusive)
    monkeypatch.setitem(probes.PROBES, "missing", lambda _a: (False, "not here"))
    monkeypatch.setattr(pytest_plugin, "_PROBED", {})  # keep the run's summary about the real broker
    monkeypatch.setattr(pytest_plugin, "_SKIPPED", {})


def test_a_probe_that_raises_answers_unknown(fake_probes):
    caps = Capabilities("127.0.0.1:1")
    assert caps.check("broken") == (None, "probe failed: ConnectionError('refused')")
    ok, reason = caps.check("inconclusive")
    assert ok is None and "marker never arrived" in reason


def test_unknown_fails_on_an_external_broker_and_skips_on_the_dev_broker(fake_probes, monkeypatch):
    caps = Capabilities("127.0.0.1:1")
    monkeypatch.setenv("STREAMKIT_TEST_BROKER", "127.0.0.1:1")
    with pytest.raises(pytest.fail.Exception, match="could not be probed"):
        require_capability(caps, "broken")
    with pytest.raises(pytest.skip.Exception, match="broker lacks missing: not here"):
        require_capability(caps, "missing")
    monkeypatch.delenv("STREAMKIT_TEST_BROKER")
    with pytest.raises(pytest.skip.Exception, match="broken unknown"):
        require_capability(caps, "broken")
    assert pytest_plugin._SKIPPED == {"missing": 1, "broken": 1}
