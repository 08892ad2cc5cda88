"""Pathway peer (runs in the dataflow peers' venv): stateless enrich, count per key, 60 s tumbling count.

    python pathway_app.py --scenario stateless|stateful|windowed --broker B --input T --output O --group G
        [--threads N]

Pathway's own Kafka connectors (``pw.io.kafka.read`` with ``format="json"`` and a schema,
``pw.io.kafka.write``) in the reader's bounded mode (``mode="static"``: the whole input from the
beginning, then the run ends; ``--records`` is not a bound here). Its default parallelism: one
process, ``PATHWAY_THREADS`` threads (1 when unset; ``--threads`` sets it).

Pathway is incremental: an operator's output is a stream of updates per minibatch, each row
with ``diff`` 1 (inserted) or -1 (retracted). Stateful is therefore ``groupby(user).reduce(count)``,
whose output is one update per key per minibatch (a retraction and an insertion), not one count
per record as the other peers emit: its output count is not comparable, its final counts are
(the harness checks those). Windowed: ``windowby`` a 60 s tumbling window on ``ts`` (origin 0)
with ``exactly_once_behavior()``, which emits each window once, when event time passes its end
(at the end of the input, every window still open).

Prints one ``RESULT {json}`` line: records/s over the whole ``pw.run()`` (Pathway's start and
shutdown included: it has no hook at the first record), CPU seconds, peak RSS; ``consumed`` is
Pathway's own count of the rows it read.
"""
import argparse
import json
import os
import time

from measure import cpu, peak_rss_mb  # peers/ is the script directory


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("--scenario", "--broker", "--input", "--output", "--group"):
        p.add_argument(name, required=True)
    p.add_argument("--records", type=int, default=0, help="unused: the input is read to its end")
    p.add_argument("--threads", type=int, default=0, help="PATHWAY_THREADS (0: Pathway's default)")
    args = p.parse_args()
    if args.threads:
        os.environ["PATHWAY_THREADS"] = str(args.threads)
    import pathway as pw  # after PATHWAY_THREADS is set

    class Order(pw.Schema):  # "id" is Pathway's row id: the order's goes by "order_id"
        order_id: int
        user: str
        amount: float
        ts: float
        note: str

    settings = {"bootstrap.servers": args.broker, "group.id": args.group, "auto.offset.reset": "earliest",
                "enable.auto.commit": "false"}
    orders = pw.io.kafka.read(settings, topic=args.input, format="json", schema=Order, mode="static",
                              json_field_paths={"order_id": "/id"})
    if args.scenario == "stateless":
        out = orders.with_columns(processed=True)
    elif args.scenario == "stateful":
        out = orders.groupby(pw.this.user).reduce(pw.this.user, count=pw.reducers.count())
    else:
        out = orders.windowby(
            pw.this.ts, window=pw.temporal.tumbling(duration=60.0, origin=0.0), instance=pw.this.user,
            behavior=pw.temporal.exactly_once_behavior(),
        ).reduce(user=pw.this._pw_instance, start=pw.this._pw_window_start, end=pw.this._pw_window_end,  # noqa: SLF001 - the documented window columns
                 value=pw.reducers.count())
    pw.io.kafka.write(out, {"bootstrap.servers": args.broker}, topic_name=args.output, format="json", key=out.user)
    total = {"n": 0}

    def on_change(key, row, time, is_addition):  # one row: the running count of rows read
        if is_addition:
            total["n"] = row["n"]

    pw.io.subscribe(orders.reduce(n=pw.reducers.count()), on_change)
    t0, cpu0 = time.perf_counter(), cpu()
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    elapsed = time.perf_counter() - t0
    print("RESULT " + json.dumps({
        "scenario": f"pathway-{args.scenario}", "consumed": total["n"], "elapsed_s": elapsed,
        "records_per_s": total["n"] / elapsed, "cpu_s": cpu() - cpu0, "peak_rss_mb": peak_rss_mb(),
        "threads": int(os.environ.get("PATHWAY_THREADS", "1"))}), flush=True)


if __name__ == "__main__":
    main()
