"""Test helpers: ``TestDriver`` (an app on the in-memory broker and a virtual clock), topic
readers, waiting; the pytest fixtures ``app`` and ``test_driver`` come with the package's
pytest plugin (streamkit/pytest_fixtures.py)."""
from .connection import confluent_conf
from .driver import SentRecord, TestDriver, VirtualClock
from .helpers import read_topic, wait_for

__all__ = ["SentRecord", "TestDriver", "VirtualClock", "confluent_conf", "read_topic", "wait_for"]
