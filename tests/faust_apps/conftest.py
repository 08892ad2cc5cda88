import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "faust_apps" in str(item.fspath) and "broker_address" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
