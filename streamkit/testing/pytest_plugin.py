"""pytest plugin: a broker for the session, broker capabilities, unique names.

By default the session starts the dev broker on a free loopback port; ``STREAMKIT_TEST_BROKER=
host:port`` points the suite at another broker (Apache Kafka). ``@pytest.mark.requires("cap")``
skips a test, with the probe's reason, where the broker lacks that capability. A probe that
cannot conclude skips on the dev broker but *fails* the test on an external broker (which claims
to be Kafka: a broken probe there would hide every test behind it). On an external broker the
run starts by listing each capability's answer and how many tests it skips; the summary at the
end lists each capability probed, its answer and how many tests it skipped.
"""
from __future__ import annotations

import os
import uuid
from typing import Any, Generator, Iterator

import pytest

from .capabilities import Capabilities

TEST_CONSUMER_SETTINGS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}


_PROBED: dict[str, tuple[bool | None, str]] = {}
_SKIPPED: dict[str, int] = {}


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "requires(capability): skip unless the broker has this capability")


def pytest_report_collectionfinish(config: Any, items: list[Any]) -> str | list[str] | None:
    """At the start of the run: which capabilities the collected tests need, how many each, and
    on an external broker each one's answer and what its tests will do (run, skip or fail)."""
    needed: dict[str, int] = {}
    for item in items:
        for marker in item.iter_markers("requires"):
            for name in marker.args:
                needed[name] = needed.get(name, 0) + 1
    if not needed:
        return None
    external = os.environ.get("STREAMKIT_TEST_BROKER")
    listing = config is not None and config.getoption("collectonly", False)
    if not external or listing:  # the dev broker starts with the first test that needs it: answers at the end
        listed = ", ".join(f"{name} ({count} test(s))" for name, count in sorted(needed.items()))
        return (f"broker capabilities needed on {external or 'the dev broker'}: {listed}; "
                "each is probed once, answers at the end")
    caps = capabilities_for(external)  # an external broker is there already: ask it now
    lines = [f"broker capabilities on {external}:"]
    for name, count in sorted(needed.items()):
        ok, reason = caps.check(name)
        fate = {True: "run", False: "skip", None: "FAIL"}[ok]
        lines.append(f"  {name}: {ANSWERS[ok]} ({reason}); {count} test(s) will {fate}")
    return lines


ANSWERS = {True: "yes", False: "no", None: "unknown"}
_CAPABILITIES: dict[str, Capabilities] = {}


def capabilities_for(address: str) -> Capabilities:
    """One Capabilities per broker address for the run: each probe runs once, whether asked at
    collection (an external broker) or by the first test that needs it."""
    return _CAPABILITIES.setdefault(address, Capabilities(address))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _PROBED:
        return
    where = os.environ.get("STREAMKIT_TEST_BROKER") or "the dev broker"
    terminalreporter.write_sep("-", f"broker capabilities ({where})")
    for name, (ok, reason) in sorted(_PROBED.items()):
        answer = ANSWERS[ok]
        terminalreporter.write_line(f"{name}: {answer} ({reason}); tests skipped for it: {_SKIPPED.get(name, 0)}")


@pytest.fixture(scope="session")
def _session_broker() -> Iterator[tuple[str, int | None]]:
    """(address, pid or None) of the broker the integration tests use."""
    external = os.environ.get("STREAMKIT_TEST_BROKER")
    if external:
        pid = os.environ.get("STREAMKIT_TEST_BROKER_PID")
        yield external, int(pid) if pid else None
        return
    from ..devbroker import start_dev_broker

    broker = start_dev_broker()
    try:
        yield broker.address, broker.process.pid
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def broker_address(_session_broker: tuple[str, int | None]) -> str:
    """``host:port`` of the broker the integration tests use."""
    return _session_broker[0]


@pytest.fixture
def broker_pid(_session_broker: tuple[str, int | None]) -> int:
    """The broker's process id, for tests that freeze it (SIGSTOP/SIGCONT): the dev broker's, or
    ``STREAMKIT_TEST_BROKER_PID`` for an external broker; skipped when unknown."""
    pid = _session_broker[1]
    if pid is None:
        pytest.skip("the external broker's pid is unknown: set STREAMKIT_TEST_BROKER_PID to freeze it")
    return pid


@pytest.fixture(scope="session")
def capabilities(broker_address: str) -> Capabilities:
    return capabilities_for(broker_address)


@pytest.fixture(autouse=True)
def _check_required_capabilities(request: Any) -> None:
    for marker in request.node.iter_markers("requires"):
        caps: Capabilities = request.getfixturevalue("capabilities")
        for name in marker.args:
            require_capability(caps, name)


def require_capability(caps: Capabilities, name: str) -> None:
    """Skip (or, for an unknown answer on an external broker, fail) unless the broker has it;
    for tests whose need depends on a parameter (``requires`` marks the whole test)."""
    ok, reason = caps.check(name)
    _PROBED[name] = (ok, reason)
    if ok is None and os.environ.get("STREAMKIT_TEST_BROKER"):
        pytest.fail(f"capability {name} could not be probed on {caps.address}: {reason}")
    if not ok:
        _SKIPPED[name] = _SKIPPED.get(name, 0) + 1
        pytest.skip(f"broker lacks {name}: {reason}" if ok is False else f"{name} unknown: {reason}")


@pytest.fixture
def unique(request: Any) -> str:
    """A short unique suffix for topic, group and app names. On an external broker, the topics
    whose names hold the suffix of a test that passed are deleted when the session ends (a
    failed test's stay for a look; ``STREAMKIT_TEST_KEEP_TOPICS=1`` keeps all): a broker that
    serves suite after suite otherwise gathers thousands of topics, restarts slowly and runs
    out of file handles."""
    suffix = uuid.uuid4().hex[:8]
    _SUFFIXES[suffix] = request.node.nodeid
    return suffix


_SUFFIXES: dict[str, str] = {}  # unique suffix -> the test it was handed to
_FAILED: set[str] = set()  # node ids of tests that failed in any phase


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    if outcome.get_result().failed:
        _FAILED.add(item.nodeid)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    external = os.environ.get("STREAMKIT_TEST_BROKER")
    if external and not os.environ.get("STREAMKIT_TEST_KEEP_TOPICS"):
        problem = _delete_passed_tests_topics(external)
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if problem and reporter is not None:
            reporter.write_line(f"streamkit: the passed tests' topics on {external} were not all deleted: {problem}")


def _delete_passed_tests_topics(address: str) -> str | None:
    """Delete the topics named with a passed test's ``unique`` suffix (see ``unique``); what
    went wrong, if anything (the tests' verdicts stand either way)."""
    passed = {suffix for suffix, node in _SUFFIXES.items() if node not in _FAILED}
    if not passed:
        return None
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": address})
    try:
        names = [name for name in admin.list_topics(timeout=30).topics if any(suffix in name for suffix in passed)]
        for future in admin.delete_topics(names, operation_timeout=30).values() if names else ():
            future.result(60)
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the tests' verdicts stand
        return repr(exc)
    return None
