# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Capability probes answer yes, no or unknown; unknown never passes for a missing feature."""
from __future__ import annotations

import pytest

from streamkit.testing import capabilities as probes
from streamkit.testing import pytest_plugin
from streamkit.testing.capabilities import Capabilities, ProbeInconclusive
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


class _Item:
    """What the collection hook reads of a collected test: its ``requires`` markers."""

    def __init__(self, *names: str) -> None:
        self.marks = [pytest.mark.requires(name).mark for name in names]

    def iter_markers(self, name: str):
        return iter(self.marks if name == "requires" else [])


def test_the_run_starts_with_each_answer_and_what_its_tests_will_do_on_an_external_broker(fake_probes, monkeypatch):
    monkeypatch.setattr(pytest_plugin, "_CAPABILITIES", {})
    monkeypatch.setenv("STREAMKIT_TEST_BROKER", "127.0.0.1:1")
    items = [_Item("missing"), _Item("missing", "broken"), _Item()]
    lines = pytest_plugin.pytest_report_collectionfinish(None, items)
    assert lines == ["broker capabilities on 127.0.0.1:1:",
                     "  broken: unknown (probe failed: ConnectionError('refused')); 1 test(s) will FAIL",
                     "  missing: no (not here); 2 test(s) will skip"]
    # the tests ask the same Capabilities: each probe ran once
    assert pytest_plugin.capabilities_for("127.0.0.1:1").results.keys() == {"broken", "missing"}


def test_on_the_dev_broker_the_run_starts_with_what_is_needed(fake_probes, monkeypatch):
    monkeypatch.delenv("STREAMKIT_TEST_BROKER", raising=False)
    line = pytest_plugin.pytest_report_collectionfinish(None, [_Item("missing"), _Item("missing")])
    assert line.startswith("broker capabilities needed on the dev broker: missing (2 test(s))"), line
    assert pytest_plugin.pytest_report_collectionfinish(None, [_Item()]) is None


class _Producer:
    """A transactional producer that accepts everything (the read is what the test sets)."""

    def __init__(self, _config) -> None:
        pass

    def __getattr__(self, _name):
        return lambda *args, **kwargs: None


@pytest.mark.parametrize("read, answer", [
    ([], None),  # the committed marker never came: not a yes
    ([b"aborted"], None),  # an aborted record without the marker proves nothing either
    ([b"done"], True),
    ([b"aborted", b"done"], False),
])
def test_read_committed_answers_only_once_it_read_the_committed_marker(monkeypatch, read, answer):
    monkeypatch.setattr(probes, "_topic", lambda _address: "t")
    monkeypatch.setattr(probes, "Producer", _Producer)
    monkeypatch.setattr(probes, "_read", lambda *_args, **_kw: read)
    ok, reason = Capabilities("127.0.0.1:1").check("read_committed_hides_aborted")
    assert ok is answer, reason
