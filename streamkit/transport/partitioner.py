"""Java-compatible key partitioning, so keys land where Java and kafka-python producers put them.

The hash is aiokafka's murmur2 (a port of the Java client's), not a copy of our own.
"""
from __future__ import annotations

from aiokafka.partitioner import murmur2


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` (positive murmur2 mod n)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
