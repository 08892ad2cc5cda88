"""Java-compatible key partitioning, so keys land where Java and kafka-python producers put them.

Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the partition
count. librdkafka (bundled with confluent-kafka, a dependency) exports that very function; it
is called through ctypes with the GIL held (~0.25 µs a key; a C extension that released the GIL
for each hash let the fetch and delivery threads take it from the worker on every record and
cost 40% of a table's throughput). Where librdkafka cannot be loaded, aiokafka's pure-Python
port (~2.5 µs) does it. Either way results are memoised: hot keys (users, accounts) repeat.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import random
from pathlib import Path
from typing import Callable, Sequence

from aiokafka.partitioner import murmur2

log = logging.getLogger("streamkit.partitioner")
KEY_CACHE_SIZE = 1 << 16
JAVA_FOOBAR_OF_10 = (-790332482 & 0x7FFFFFFF) % 10  # Java: murmur2(b"foobar") = -790332482


def _librdkafka_partitioner() -> Callable[[bytes, int], int] | None:
    """``rd_kafka_msg_partitioner_murmur2(rkt, key, len, partitions, opaque, opaque)`` from the
    librdkafka confluent-kafka loads (its wheel's copy, else the system's), or None.

    Called without ``argtypes``: their per-argument conversion doubled the cost of a call
    (~0.49 against ~0.25 µs). ctypes then passes the length as a C int, which the platform's
    calling convention widens to the ``size_t`` parameter; the result is checked at load
    against the Python murmur2 over keys of many lengths, and the Python one is used if any
    differs."""
    try:
        import confluent_kafka
    except ImportError:
        return None
    bundled = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    candidates = [str(p) for p in sorted(bundled.glob("librdkafka*.so*"))] + [ctypes.util.find_library("rdkafka")]
    for path in filter(None, candidates):
        try:
            fn = ctypes.PyDLL(path).rd_kafka_msg_partitioner_murmur2  # PyDLL: the GIL stays held
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int32

        def partition(key: bytes, partitions: int, _fn: Callable[..., int] = fn) -> int:
            return _fn(None, key, len(key), partitions, None, None)

        if partition(b"foobar", 10) == JAVA_FOOBAR_OF_10 and all(
                partition(key, n) == _python_partition(key, n) for key, n in _SAMPLES):
            return partition
        log.warning("%s places keys unlike Java's partitioner; using the pure-Python murmur2", path)
    return None


def _python_partition(key: bytes, partitions: int) -> int:
    hashed: int = murmur2(key)  # aiokafka ships no type hints
    return (hashed & 0x7FFFFFFF) % partitions


_SAMPLES = [(bytes(i % 251 for i in range(length)), n) for length in range(65) for n in (3, 1000)]
_partition = _librdkafka_partitioner() or _python_partition
_known: dict[int, dict[bytes, int]] = {}  # partition count -> key -> partition


def hash_partition(key: bytes, partitions: int) -> int:
    """:func:`partition_for_key` without its memo, for callers that keep their own (a table
    remembers each key's placement): a second memo would only add a miss per new key."""
    return _partition(key, partitions)


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` (positive murmur2 mod n).

    Memoised in a dict emptied when full: an LRU's bookkeeping on a miss cost more than the
    hash (a table of distinct keys misses on every record), a dict miss little."""
    known = _known.get(partitions)
    if known is None:
        known = _known[partitions] = {}
    number = known.get(key)
    if number is None:
        if len(known) >= KEY_CACHE_SIZE:
            known.clear()
        number = known[key] = _partition(key, partitions)
    return number


def default_partitioner(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
    """aiokafka's DefaultPartitioner with the memoised hash (keyless records: any available)."""
    if key is None:
        return random.choice(available or all_partitions)
    return all_partitions[partition_for_key(key, len(all_partitions))]
