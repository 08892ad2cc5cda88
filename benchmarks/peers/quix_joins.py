"""Quix Streams' joins (runs in the peers venv), the peers of benchmarks/joins.py.

    python quix_joins.py --scenario join-table --broker B --customers T --orders T --no-orders T \
        --customer-count C --output O --group G --records N
    python quix_joins.py --scenario join-window --broker B --lefts T --rights T --within-ms W \
        --output O --group G --records N

- join-table: ``orders.join_asof(customers, how="left")``, Quix's stream-table join (the right
  side's records go to a store, each left record reads the newest value for its key at or
  before its timestamp). ``join_lookup`` is for external sources (a database, Quix's
  configuration service), so it is not the equivalent. Two runs of the app, one state dir,
  as benchmarks/joins.py does: the first reads an empty orders topic (``--no-orders``) and
  stops once every customer is stored (``app.run()`` commits: the store's changelog is
  flushed), the second reads the orders. (In one run Quix's timestamp-ordered reading also
  loads the customers first, mostly, but the checkpoint that flushes the 100,000 changelog
  records then falls among the orders.) Timed: the load (first to last customer) and the
  orders (first order to the end of the second ``app.run()``, whose final commit flushes).
- join-window: ``lefts.join_interval(rights, backward_ms=W, forward_ms=W)``, every pair to the
  output topic; records/s counts both sides, from the first input to the end of ``app.run()``.

Quix's defaults otherwise (grace 7 days: no record leaves a store during a run). Prints one
``RESULT {json}`` line like quix_app.py, plus the join's counts.
"""
import argparse
import json
import shutil
import tempfile
import time

from measure import cpu, peak_rss_mb
from quixstreams import Application


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name in ("--scenario", "--broker", "--output", "--group"):
        p.add_argument(name, required=True)
    p.add_argument("--records", type=int, required=True, help="orders, or records per side")
    for name in ("--customers", "--orders", "--no-orders", "--lefts", "--rights"):
        p.add_argument(name)
    p.add_argument("--customer-count", type=int)
    p.add_argument("--within-ms", type=int)
    return p.parse_args()


def make_app(args: argparse.Namespace, state_dir: str) -> Application:
    return Application(broker_address=args.broker, consumer_group=args.group, auto_offset_reset="earliest",
                       state_dir=state_dir, loglevel="WARNING")


def enrich(order, customer):
    """A new dict (Quix: a merger must not change its inputs)."""
    if customer is None:
        return {**order, "name": None, "tier": None}
    return {**order, "name": customer["name"], "tier": customer["tier"]}


def table_app(args: argparse.Namespace, state_dir: str, orders_topic: str, state: dict, load_only: bool) -> Application:
    """Customers into the join's store, orders from ``orders_topic`` joined and sent; with
    ``load_only`` it stops after the last customer (``app.run()`` then commits)."""
    app = make_app(args, state_dir)

    def customer_seen(value):
        if state["load_t0"] is None:
            state["load_t0"], state["load_cpu0"] = time.perf_counter(), cpu()
        state["loaded"] += 1
        if state["loaded"] == args.customer_count:
            state["load_t1"], state["load_cpu1"] = time.perf_counter(), cpu()
            if load_only:
                app.stop()

    def order_seen(value):
        if state["t0"] is None:
            state["t0"], state["cpu0"] = time.perf_counter(), cpu()
        state["orders"] += 1
        if state["orders"] >= args.records:
            app.stop()  # after this record: the loop ends, the checkpoint commits

    def check(value):
        if value["name"] is None:
            state["missing"] += 1

    customers = app.dataframe(app.topic(args.customers, value_deserializer="json")).update(customer_seen)
    orders = app.dataframe(app.topic(orders_topic, value_deserializer="json")).update(order_seen)
    joined = orders.join_asof(customers, how="left", on_merge=enrich).update(check)
    joined.to_topic(app.topic(args.output, value_serializer="json"))
    return app


def join_table(args: argparse.Namespace, state_dir: str) -> dict:
    state = {"loaded": 0, "load_t0": None, "load_t1": None, "load_cpu0": 0.0, "load_cpu1": 0.0,
             "orders": 0, "t0": None, "cpu0": 0.0, "missing": 0}
    table_app(args, state_dir, args.no_orders, state, load_only=True).run()  # phase 1: the table
    committed = time.perf_counter()
    loaded = state["loaded"]
    table_app(args, state_dir, args.orders, state, load_only=False).run()  # phase 2: the orders
    elapsed = time.perf_counter() - state["t0"]
    load_s = state["load_t1"] - state["load_t0"]
    return {"scenario": "quix-join-table", "consumed": state["orders"], "elapsed_s": elapsed,
            "records_per_s": state["orders"] / elapsed, "cpu_s": cpu() - state["cpu0"], "peak_rss_mb": peak_rss_mb(),
            "table_keys": args.customer_count, "table_load_s": load_s, "table_load_rps": loaded / load_s,
            "table_load_cpu_s": state["load_cpu1"] - state["load_cpu0"], "table_commit_s": committed - state["load_t1"],
            "missing_customers": state["missing"], "outputs": state["orders"],
            "customers_read_in_phase_2": state["loaded"] - loaded}


def join_window(args: argparse.Namespace, state_dir: str) -> dict:
    app = make_app(args, state_dir)
    total = 2 * args.records
    state = {"inputs": 0, "pairs": 0, "t0": None, "cpu0": 0.0}

    def seen(value):
        if state["t0"] is None:
            state["t0"], state["cpu0"] = time.perf_counter(), cpu()
        state["inputs"] += 1
        if state["inputs"] >= total:
            app.stop()  # after this record (and the pairs it makes)

    def pair(left, right):
        return {"key": left["key"], "left": left["id"], "right": right["id"]}

    def count(value):
        state["pairs"] += 1

    lefts = app.dataframe(app.topic(args.lefts, value_deserializer="json")).update(seen)
    rights = app.dataframe(app.topic(args.rights, value_deserializer="json")).update(seen)
    joined = lefts.join_interval(rights, how="inner", on_merge=pair, backward_ms=args.within_ms,
                                 forward_ms=args.within_ms).update(count)
    joined.to_topic(app.topic(args.output, value_serializer="json"))
    app.run()
    elapsed = time.perf_counter() - state["t0"]
    return {"scenario": "quix-join-window", "consumed": state["inputs"], "elapsed_s": elapsed,
            "records_per_s": state["inputs"] / elapsed, "cpu_s": cpu() - state["cpu0"], "peak_rss_mb": peak_rss_mb(),
            "pairs": state["pairs"], "within_ms": args.within_ms}


def main() -> None:
    args = parse()
    state_dir = tempfile.mkdtemp(prefix="quix-state-")
    try:
        result = (join_table if args.scenario == "join-table" else join_window)(args, state_dir)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
