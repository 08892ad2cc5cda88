"""What the join scenarios read, written once per run, and the answers they must give.

- join-table: ``customers`` (``CUSTOMERS`` keys ``c<i>``, ``{"name": "name-<i>", "tier": ...}``),
  ``orders`` (N records keyed ``c<i % CUSTOMERS>``, ~100-byte JSON) and an empty orders topic
  (``no_orders``, read while a scenario loads its table). Every customer's timestamp is older
  than every order's, so an as-of lookup (Quix's ``join_asof``) finds each customer;
- join-window: ``lefts`` and ``rights``, N records each, keys ``k<i % WINDOW_KEYS>``; left ``i``
  at ``t0 + STEP_MS * i``, right ``i`` ``RIGHT_LAG_MS`` later. ``expected_pairs`` counts the
  pairs a join ``WITHIN_MS`` either way must give (with these constants: N, one per left).

All topics have 4 partitions and are produced with murmur2 (``produce_all``), the partitioner
streamkit's tables and joins expect (the Java client's).
"""
from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from common import create_topic, produce_all
from quick_stateless import PARTITIONS

CUSTOMERS = 100_000
TIERS = ("bronze", "silver", "gold", "platinum")
WINDOW_KEYS = 1000
STEP_MS = 10
RIGHT_LAG_MS = 5
WITHIN_MS = 1000
# Kafka's defaults, spelled out (Quix derives its join stores' changelog config from them)
TOPIC_CONFIG = {"retention.ms": "604800000", "retention.bytes": "-1"}
FILL_CONFIG = {"linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 500000}


@dataclass
class JoinInputs:
    """The filled topics of one run (None: that family was not asked for) and the truth."""

    records: int
    customers: str | None = None
    orders: str | None = None
    no_orders: str | None = None  # empty: the orders input while a scenario loads its table
    lefts: str | None = None
    rights: str | None = None
    expected_pairs: int = 0
    fill_s: float = 0.0

    @property
    def topics(self) -> list[str]:
        return [t for t in (self.customers, self.orders, self.no_orders, self.lefts, self.rights) if t]


def customer_records(t0_ms: int) -> Iterator[tuple[bytes, bytes, int]]:
    import orjson

    for i in range(CUSTOMERS):
        yield f"c{i}".encode(), orjson.dumps({"name": f"name-{i}", "tier": TIERS[i % len(TIERS)]}), t0_ms + i


def order_records(n: int, t0_ms: int) -> Iterator[tuple[bytes, bytes, int]]:
    """After every customer: order ``i`` at ``t0 + CUSTOMERS + i`` ms."""
    import orjson

    for i in range(n):
        ts = t0_ms + CUSTOMERS + i
        customer = f"c{i % CUSTOMERS}"
        yield customer.encode(), orjson.dumps({"id": i, "customer": customer, "item": f"sku-{i % 1000:05d}",
                                               "amount": 12.5, "ts": ts / 1000.0, "note": "benchmark-order"}), ts


def window_records(n: int, t0_ms: int, lag_ms: int) -> Iterator[tuple[bytes, bytes, int]]:
    import orjson

    for i in range(n):
        key, ts = f"k{i % WINDOW_KEYS}", t0_ms + STEP_MS * i + lag_ms
        yield key.encode(), orjson.dumps({"id": i, "key": key, "item": f"sku-{i % 1000:05d}", "amount": 12.5,
                                          "ts": ts / 1000.0, "note": "benchmark-window"}), ts


def expected_pairs(n: int, within_ms: int = WITHIN_MS) -> int:
    """Pairs (left, right) with the same key whose timestamps differ by at most ``within_ms``,
    counted from the records' definition (not assumed from the constants)."""
    rights: dict[int, list[int]] = {}
    for i in range(n):
        rights.setdefault(i % WINDOW_KEYS, []).append(STEP_MS * i + RIGHT_LAG_MS)  # ascending per key
    total = 0
    for i in range(n):
        times, t = rights[i % WINDOW_KEYS], STEP_MS * i
        total += bisect.bisect_right(times, t + within_ms) - bisect.bisect_left(times, t - within_ms)
    return total


def prepare(admin: Any, broker: str, run_id: str, records: int, *, table: bool, window: bool,
            created: list[str]) -> JoinInputs:
    """Create and fill the topics of the families asked for (each name added to ``created``
    as soon as it exists, for the caller's cleanup); timestamps end about now."""
    inputs = JoinInputs(records)
    started = time.perf_counter()
    if table:
        inputs.customers, inputs.orders = f"bench-customers-{run_id}", f"bench-orders-{run_id}"
        inputs.no_orders = f"bench-no-orders-{run_id}"
        create_topic(admin, inputs.no_orders, PARTITIONS, TOPIC_CONFIG)
        created.append(inputs.no_orders)
        t0 = int(time.time() * 1000) - CUSTOMERS - records
        for topic, rows in ((inputs.customers, customer_records(t0)), (inputs.orders, order_records(records, t0))):
            create_topic(admin, topic, PARTITIONS, TOPIC_CONFIG)
            created.append(topic)
            produce_all(broker, topic, rows, topic, **FILL_CONFIG)
    if window:
        inputs.lefts, inputs.rights = f"bench-lefts-{run_id}", f"bench-rights-{run_id}"
        t0 = int(time.time() * 1000) - STEP_MS * records
        for topic, lag in ((inputs.lefts, 0), (inputs.rights, RIGHT_LAG_MS)):
            create_topic(admin, topic, PARTITIONS, TOPIC_CONFIG)
            created.append(topic)
            produce_all(broker, topic, window_records(records, t0, lag), topic, **FILL_CONFIG)
        inputs.expected_pairs = expected_pairs(records)
    inputs.fill_s = time.perf_counter() - started
    return inputs
