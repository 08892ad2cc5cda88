"""The streamkit pipeline every benchmark scenario runs, defined once.

Stateless: decode an ``Order`` (a Record), add a field, produce a ``ProcessedOrder``.
Stateful: count orders per user in a RocksDB table (changelog included), produce the count.
Windowed: count orders per user per minute of their ``ts`` in a tumbling window; each closed
minute's final count goes to the output once (the ``windowed-*`` scenarios).
Function / fold: the stateless and the stateful ones written as a plain ``def fn(order)`` agent
and as ``@app.fold`` (the ``*-function`` / ``*-fold`` scenarios): the worker runs those over
each fetched batch without a coroutine per record.
Columnar: the stateless one as ``@app.agent(..., columnar=True)`` over a pyarrow RecordBatch per
fetched batch (the ``*-columnar`` scenarios; ``on_records(n)`` counts its rows, once a batch).
``on_record`` runs for every record before it is transformed (meters, stop conditions);
``before_start`` is awaited once before the agent takes its first record.
"""
from __future__ import annotations

import atexit
import shutil
from typing import Any, Awaitable, Callable

import streamkit as sk

PARTITIONS = 4


class Order(sk.Record):
    id: int
    user: str
    amount: float
    ts: float


class ProcessedOrder(sk.Record):
    id: int
    user: str
    amount: float
    ts: float
    processed: bool


class UserCount(sk.Record):
    user: str
    count: int


def build_app(*, group: str, broker: str, driver: str, input_topic: str, output_topic: str,
              guarantee: str = "at_least_once", stateful: bool | str = False,
              on_record: Callable[[Order], None] = lambda order: None,
              before_start: Callable[[], Awaitable[None]] | None = None,
              on_records: Callable[[int], None] = lambda n: None, **settings: Any) -> tuple[sk.App, Any]:
    """The app and its agent, configured like the other scenarios (6 s sessions, earliest; no
    web server, so concurrent worker processes do not compete for its port)."""
    settings.setdefault("web_enabled", False)
    # Each scenario runs in a process of its own: its stores go when it exits (a 10M-key run
    # left ~60 MB under /tmp per run, every run's)
    atexit.register(shutil.rmtree, f"/tmp/{group}", True)
    app = sk.App(group, broker=broker, driver=driver, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                 auto_offset_reset="earliest", processing_guarantee=guarantee, data_dir=f"/tmp/{group}", **settings)
    source = app.topic(input_topic, key_type=str, value_type=Order, partitions=PARTITIONS)
    output = app.topic(
        output_topic,
        key_type=str,
        value_type=UserCount if stateful and stateful != "counted" else ProcessedOrder,
        partitions=PARTITIONS,
    )
    if stateful == "windowed":
        per_minute = app.Table("counts", default=int).tumbling(60).relative_to_field(Order.ts).final(output)

        @app.agent(source)
        async def count_per_minute(stream):
            if before_start is not None:
                await before_start()
            async for order in stream:
                on_record(order)
                per_minute[order.user] += 1

        return app, count_per_minute
    if stateful == "function":

        @app.agent(source, sink=[output])
        def enrich_order(order):
            on_record(order)
            return ProcessedOrder(order.id, order.user, order.amount, order.ts, True)

        return app, enrich_order
    if stateful == "columnar":
        import pyarrow as pa

        @app.agent(source, sink=[output], columnar=True)
        def enrich_batch(batch: Any) -> Any:
            on_records(batch.num_rows)
            return pa.RecordBatch.from_arrays(
                [batch.column("key"), batch.column("id"), batch.column("user"), batch.column("amount"),
                 batch.column("ts"), pa.repeat(True, batch.num_rows)],
                names=["key", "id", "user", "amount", "ts", "processed"])

        return app, enrich_batch
    if stateful == "fold":
        per_user = app.Table("counts", default=int, partitions=PARTITIONS)

        @app.fold(source, table=per_user, sink=[output])
        def count_orders(count, order):
            on_record(order)
            return count + 1, [UserCount(order.user, count + 1)]

        return app, count_orders
    counts = app.Table("counts", default=int, partitions=PARTITIONS) if stateful else None
    counted = stateful == "counted"  # the table updated, the order sent on (latency.py: its ts)

    @app.agent(source, sink=[output])
    async def enrich_orders(stream):
        if before_start is not None:  # holding no record, so rebalances meanwhile stay quick
            await before_start()
        async for order in stream:
            on_record(order)
            if counts is not None:
                counts[order.user] += 1
                if not counted:
                    yield UserCount(order.user, counts[order.user])
                    continue
            yield ProcessedOrder(order.id, order.user, order.amount, order.ts, True)

    return app, enrich_orders
