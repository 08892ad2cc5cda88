"""Java-compatible key partitioning, so keys land where Java and kafka-python producers put them.

The hash is aiokafka's murmur2 (a port of the Java client's), not a copy of our own. It is pure
Python (~5 µs a key) and tables and the aiokafka producer hash on every access, so hashes are
memoised: hot keys (users, accounts) repeat, and a hit costs a dict lookup.
"""
from __future__ import annotations

import random
from functools import lru_cache
from typing import Sequence

from aiokafka.partitioner import murmur2

KEY_CACHE_SIZE = 1 << 16


@lru_cache(maxsize=KEY_CACHE_SIZE)
def key_hash(key: bytes) -> int:
    """Positive murmur2 of ``key``, as Kafka's default partitioner computes it."""
    return murmur2(key) & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` (positive murmur2 mod n)."""
    return key_hash(key) % partitions


def default_partitioner(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
    """aiokafka's DefaultPartitioner with the memoised hash (keyless records: any available)."""
    if key is None:
        return random.choice(available or all_partitions)
    return all_partitions[key_hash(key) % len(all_partitions)]
