"""streamkit's join scenarios, one per process (``python -m benchmarks run`` starts them).

- ``join-table-<driver>``: orders enriched from a 100,000-key customer table
  (``stream.join(customers, how="left")``), the same app run twice in one process (same group
  and data dir). Run 1 reads an empty orders topic (``--no-orders``) until every customer is
  in the table, then checkpoints (changelog flushed, offsets committed). Run 2 reads the real
  orders topic: the table is on local disk, each order is joined with its customer and
  yielded to the output topic. Why two runs: streamkit does not read two topics in timestamp
  order, so an orders agent started with the loader joins the first orders with a half-loaded
  table; and if it waited for the load instead, the load's checkpoint (the changelog flush of
  100,000 writes) would fall among the timed orders (as it does for Quix in one run). Quix's
  peer (peers/quix_joins.py) runs the same two phases. Timed: the load (first customer to the
  last one stored; its checkpoint separately) and the orders (first order to the final
  checkpoint).
- ``join-window-<driver>``: ``@app.agent(lefts.join(rights, within=..., grace=...))``, each
  pair yielded to the output topic. Timed from the first input record (either side; counted
  by wrapping the join's ``process``) to the final checkpoint after the expected number of
  pairs: the rate is both sides' records per second. The join keeps streamkit's default
  grace (0, Kafka Streams'): each partition's two sides are read in timestamp order, so no
  record of the pre-filled topics is late.

Prints one ``RESULT {json}`` line (``quick_stateless.Meter``'s fields plus the join's).
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import shutil
import sys
import time
from datetime import timedelta
from typing import Any

from common import cpu_seconds, final_checkpoint
from quick_stateless import PARTITIONS, Meter

import streamkit as sk

STALL_S = 5.0  # every input in, no new pair for this long: the missing pairs are not coming


class Customer(sk.Record):
    name: str
    tier: str


class Order(sk.Record):
    id: int
    customer: str
    item: str
    amount: float
    ts: float
    note: str


class EnrichedOrder(sk.Record):
    id: int
    customer: str
    item: str
    amount: float
    ts: float
    name: str | None
    tier: str | None


class Reading(sk.Record):
    id: int
    key: str
    item: str
    amount: float
    ts: float
    note: str


class Pair(sk.Record):
    key: str
    left: int
    right: int


def make_app(args: argparse.Namespace, driver: str) -> sk.App:
    """Configured like every streamkit scenario (pipeline.build_app)."""
    return sk.App(args.group, broker=args.broker, driver=driver, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                  auto_offset_reset="earliest", data_dir=f"/tmp/{args.group}", web_enabled=False)


async def wait_for(event: asyncio.Event, timeout: float, what: str) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        raise SystemExit(f"timeout: {what}") from None


# -- join-table ------------------------------------------------------------------------------------


def table_app(args: argparse.Namespace, driver: str, orders_topic: str, state: dict[str, Any],
              loaded: asyncio.Event, meter: Meter, done: asyncio.Event) -> sk.App:
    """The loader agent (customers into the table) and the orders agent (each order with its
    customer, yielded to the output topic) reading ``orders_topic``."""
    app = make_app(args, driver)
    customers_topic = app.topic(args.customers, key_type=str, value_type=Customer, partitions=PARTITIONS)
    customers = app.Table("customers", value_type=Customer, partitions=PARTITIONS)
    orders = app.topic(orders_topic, key_type=str, value_type=Order, partitions=PARTITIONS)
    output = app.topic(args.output, key_type=str, value_type=EnrichedOrder, partitions=PARTITIONS)

    @app.agent(customers_topic)
    async def load_customers(stream):
        async for customer_id, customer in stream.items():
            if state["loaded"] == 0:
                state["load_t0"], state["load_cpu0"] = time.perf_counter(), cpu_seconds()
            customers[customer_id] = customer
            state["loaded"] += 1
            if state["loaded"] >= args.customer_count:
                loaded.set()

    @app.agent(orders, sink=[output])
    async def enrich(stream):
        async for order, customer in stream.join(customers, how="left"):
            if state["orders"] == 0:
                meter.first()
            state["orders"] += 1
            if customer is None:
                state["missing"] += 1
                yield EnrichedOrder(order.id, order.customer, order.item, order.amount, order.ts, None, None)
            else:
                yield EnrichedOrder(order.id, order.customer, order.item, order.amount, order.ts, customer.name,
                                    customer.tier)
            if state["orders"] >= args.records:
                done.set()

    return app


async def run_join_table(args: argparse.Namespace, driver: str) -> dict[str, Any]:
    state: dict[str, Any] = {"loaded": 0, "orders": 0, "missing": 0}
    meter, loaded, done = Meter(), asyncio.Event(), asyncio.Event()
    app = table_app(args, driver, args.no_orders, state, loaded, meter, done)
    async with app.running():  # phase 1: the table, while the orders topic is still empty
        await wait_for(loaded, args.timeout, f"loaded {state['loaded']}/{args.customer_count} customers")
        load_t1, load_cpu1 = time.perf_counter(), cpu_seconds()
        await final_checkpoint(app)
        committed = time.perf_counter()
    loaded_in_phase_1 = state["loaded"]
    load_s = load_t1 - state["load_t0"]
    app = table_app(args, driver, args.orders, state, asyncio.Event(), meter, done)
    async with app.running():  # phase 2: the orders, the table on local disk
        await wait_for(done, args.timeout, f"enriched {state['orders']}/{args.records} orders")
        last_order = time.perf_counter()
        await final_checkpoint(app)
        meter.done()
    return meter.result(f"join-table-{driver}", state["orders"], table_keys=args.customer_count,
                        table_load_s=load_s, table_load_rps=loaded_in_phase_1 / load_s,
                        table_load_cpu_s=load_cpu1 - state["load_cpu0"], table_commit_s=committed - load_t1,
                        final_checkpoint_s=meter.t1 - last_order, missing_customers=state["missing"],
                        outputs=state["orders"],
                        customers_read_in_phase_2=state["loaded"] - loaded_in_phase_1)


# -- join-window ------------------------------------------------------------------------------------


async def run_join_window(args: argparse.Namespace, driver: str) -> dict[str, Any]:
    app = make_app(args, driver)
    lefts = app.topic(args.lefts, key_type=str, value_type=Reading, partitions=PARTITIONS)
    rights = app.topic(args.rights, key_type=str, value_type=Reading, partitions=PARTITIONS)
    output = app.topic(args.output, key_type=str, value_type=Pair, partitions=PARTITIONS)
    join = lefts.join(rights, within=timedelta(milliseconds=args.within_ms),
                      grace=timedelta(milliseconds=args.grace_ms or 0))
    meter, done = Meter(), asyncio.Event()
    total, expected = 2 * args.records, args.expected_pairs
    state = {"inputs": 0, "pairs": 0}
    process = join.process

    def counted(event: Any) -> list[Any]:
        """Every input record of either side, before it is joined (the rate's numerator)."""
        if state["inputs"] == 0:
            meter.first()
        state["inputs"] += 1
        return process(event)

    join.process = counted  # type: ignore[method-assign]

    @app.agent(join, sink=[output])
    async def pair_up(pairs):
        async for key, (left, right) in pairs.items():
            state["pairs"] += 1
            yield Pair(key, left.id, right.id)
            if state["pairs"] >= expected and state["inputs"] >= total:
                done.set()

    deadline = time.monotonic() + args.timeout
    stalled = False
    async with app.running():
        last, last_change = -1, time.perf_counter()
        while not done.is_set():  # done, or every input in and the pairs stopped coming
            if time.monotonic() > deadline:
                raise SystemExit(f"timeout: {state['inputs']}/{total} inputs, {state['pairs']}/{expected} pairs")
            if state["pairs"] != last:
                last, last_change = state["pairs"], time.perf_counter()
            elif state["inputs"] >= total and time.perf_counter() - last_change > STALL_S:
                stalled = True
                break
            try:
                await asyncio.wait_for(done.wait(), 0.5)
            except TimeoutError:
                pass
        checkpoint_started = time.perf_counter()
        await final_checkpoint(app)
        meter.done()
        alignment = dataclasses.asdict(join.alignment)  # records handed out unpaired, and why
    checkpoint_s = meter.t1 - checkpoint_started
    if stalled:  # the wait for pairs that did not come is not the join's throughput
        meter.t1 = last_change + checkpoint_s
    return meter.result(f"join-window-{driver}", state["inputs"], pairs=state["pairs"], expected_pairs=expected,
                        late_records=join.late_records, alignment=alignment, within_ms=args.within_ms,
                        grace_ms=args.grace_ms,
                        final_checkpoint_s=checkpoint_s, stalled=stalled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", required=True, help="join-table-<driver> or join-window-<driver>")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--records", type=int, required=True, help="orders, or records per side")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--customers")
    parser.add_argument("--orders")
    parser.add_argument("--no-orders", help="an empty topic: the orders agent's input while the table loads")
    parser.add_argument("--customer-count", type=int)
    parser.add_argument("--lefts")
    parser.add_argument("--rights")
    parser.add_argument("--within-ms", type=int)
    parser.add_argument("--grace-ms", type=int)
    parser.add_argument("--expected-pairs", type=int)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    family, _, driver = args.scenario.rpartition("-")
    runs = {"join-table": run_join_table, "join-window": run_join_window}
    if family not in runs:
        raise SystemExit(f"unknown scenario {args.scenario!r}")
    try:
        result = asyncio.run(runs[family](args, driver))
    finally:
        shutil.rmtree(f"/tmp/{args.group}", ignore_errors=True)  # the stores (make_app's data_dir)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
