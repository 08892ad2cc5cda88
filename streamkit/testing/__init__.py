"""Test helpers: a pytest plugin (broker fixture, capability probe), topic readers, waiting."""
from .helpers import read_topic, wait_for

__all__ = ["read_topic", "wait_for"]
