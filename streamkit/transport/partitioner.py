"""Java-compatible key partitioning, so keys land where Java and kafka-python producers put them.

Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the partition
count. librdkafka (bundled with confluent-kafka, a dependency) exports that very function; it
is called through ctypes with the GIL held (~0.4 µs a key; a C extension that released the GIL
for each hash let the fetch and delivery threads take it from the worker on every record and
cost 40% of a table's throughput). Where librdkafka cannot be loaded, aiokafka's pure-Python
port (~2.5 µs) does it. Either way results are memoised: hot keys (users, accounts) repeat.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import random
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from aiokafka.partitioner import murmur2

log = logging.getLogger("streamkit.partitioner")
KEY_CACHE_SIZE = 1 << 16
JAVA_FOOBAR_OF_10 = (-790332482 & 0x7FFFFFFF) % 10  # Java: murmur2(b"foobar") = -790332482


def _librdkafka_partitioner() -> Callable[[bytes, int], int] | None:
    """``rd_kafka_msg_partitioner_murmur2(rkt, key, len, partitions, opaque, opaque)`` from the
    librdkafka confluent-kafka loads (its wheel's copy, else the system's), or None."""
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
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p,
                       ctypes.c_void_p]

        def partition(key: bytes, partitions: int, _fn: Callable[..., int] = fn) -> int:
            return _fn(None, key, len(key), partitions, None, None)

        if partition(b"foobar", 10) == JAVA_FOOBAR_OF_10:
            return partition
        log.warning("%s places keys unlike Java's partitioner; using the pure-Python murmur2", path)
    return None


def _python_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


_partition = _librdkafka_partitioner() or _python_partition


@lru_cache(maxsize=KEY_CACHE_SIZE)
def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` (positive murmur2 mod n)."""
    return _partition(key, partitions)


def default_partitioner(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
    """aiokafka's DefaultPartitioner with the memoised hash (keyless records: any available)."""
    if key is None:
        return random.choice(available or all_partitions)
    return all_partitions[partition_for_key(key, len(all_partitions))]
