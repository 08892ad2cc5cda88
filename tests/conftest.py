import pytest

pytest_plugins = ["streamkit.testing.pytest_plugin", "pytester"]


@pytest.fixture(params=["aiokafka", "confluent"])
def driver(request):
    """Integration tests run once per Kafka driver."""
    return request.param
