import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.broker)


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory):
    """A secured Apache Kafka started for the session from STREAMKIT_TEST_KAFKA_BIN (secured_kafka.py),
    shared by the security tests; stopped by its pid at the end."""
    from tests.integration.secured_kafka import KAFKA_BIN, SKIP_REASON, start

    if not KAFKA_BIN:
        pytest.skip(SKIP_REASON)
    yield from start(tmp_path_factory.mktemp("secured-kafka"))
