"""The pytest plugin deletes a passed test's topics from an external broker, keeps a failed one's."""
import textwrap
import time

from confluent_kafka.admin import AdminClient


def test_a_session_on_an_external_broker_deletes_passed_tests_topics_only(pytester, broker_address, monkeypatch):
    pytester.makeconftest('pytest_plugins = ["streamkit.testing.pytest_plugin"]\n')
    names = pytester.path / "names.txt"
    pytester.makepyfile(test_inner=textwrap.dedent(f"""
        from confluent_kafka.admin import AdminClient, NewTopic

        def make(unique, kind):
            name = f"plugin-{{kind}}-{{unique}}"
            admin = AdminClient({{"bootstrap.servers": "{broker_address}"}})
            for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
                future.result(15)
            with open({str(names)!r}, "a") as out:
                out.write(name + "\\n")

        def test_passes(unique):
            make(unique, "passed")

        def test_fails(unique):
            make(unique, "failed")
            assert False, "this test fails on purpose"
    """))
    monkeypatch.setenv("STREAMKIT_TEST_BROKER", broker_address)
    monkeypatch.delenv("STREAMKIT_TEST_KEEP_TOPICS", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, failed=1)
    created = dict(line.split("-", 2)[1:] for line in names.read_text().split())  # kind -> unique
    assert set(created) == {"passed", "failed"}
    admin = AdminClient({"bootstrap.servers": broker_address})
    failed, passed = f"plugin-failed-{created['failed']}", f"plugin-passed-{created['passed']}"
    deadline = time.monotonic() + 30  # a deletion reaches every broker's metadata a moment later
    while passed in (topics := admin.list_topics(timeout=30).topics) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert failed in topics  # the positive marker: the listing shows the kept topic
    assert passed not in topics
    for future in admin.delete_topics([failed]).values():
        future.result(30)
