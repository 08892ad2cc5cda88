"""Bytewax peer (runs in the dataflow peers' venv): stateless enrich, count per key, 60 s tumbling count.

    python bytewax_app.py --scenario stateless|stateful|windowed --broker B --input T --output O --group G
        [--workers N]

Bytewax's own Kafka operators (``bytewax.connectors.kafka.operators``) read the whole input from
the beginning and stop at its end (``tail=False``: the connector's bounded mode; ``--records`` is
not a bound here, so a run covers every input record). Its default parallelism, as
``python -m bytewax.run`` has it: one process, one worker thread (``--workers`` adds threads).
Stateful: ``stateful_map`` per user (in-memory state: Bytewax snapshots it only with recovery
configured, not to a changelog topic). Windowed: ``count_window`` over an ``EventClock`` on
``ts`` with a 60 s ``TumblingWindower`` aligned to the epoch; it emits each window once, when
the watermark passes its end (at the end of the input, every window still open).

Prints one ``RESULT {json}`` line: records/s from the first record to the end of the run (the
sink flushed), CPU seconds in that window, peak RSS.
"""
import argparse
import json
import time
from datetime import datetime, timedelta, timezone

import bytewax.operators as op
import orjson
from bytewax.connectors.kafka import KafkaSinkMessage
from bytewax.connectors.kafka import operators as kop
from bytewax.dataflow import Dataflow
from bytewax.operators.windowing import EventClock, TumblingWindower, count_window
from bytewax.run import cli_main
from measure import cpu, peak_rss_mb  # peers/ is the script directory

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("--scenario", "--broker", "--input", "--output", "--group"):
        p.add_argument(name, required=True)
    p.add_argument("--records", type=int, default=0, help="unused: the input is read to its end")
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args()
    state = {"n": 0, "t0": None, "cpu0": 0.0}

    def seen(msg):
        if state["t0"] is None:
            state["t0"], state["cpu0"] = time.perf_counter(), cpu()
        state["n"] += 1
        return msg

    flow = Dataflow(f"bench-{args.scenario}")
    source = kop.input("in", flow, brokers=[args.broker], topics=[args.input], tail=False)
    msgs = op.map("seen", source.oks, seen)
    if args.scenario == "stateless":
        def enrich(msg):
            doc = orjson.loads(msg.value)
            doc["processed"] = True
            return KafkaSinkMessage(msg.key, orjson.dumps(doc))

        out = op.map("enrich", msgs, enrich)
    else:
        decoded = op.map("decode", msgs, lambda msg: orjson.loads(msg.value))
        if args.scenario == "stateful":
            def count(total, _order):
                total = (total or 0) + 1
                return total, total

            counts = op.stateful_map("count", op.key_on("user", decoded, lambda o: o["user"]), count)
            out = op.map("encode", counts, lambda kv: KafkaSinkMessage(
                kv[0].encode(), orjson.dumps({"user": kv[0], "count": kv[1]})))
        else:
            clock = EventClock(lambda o: datetime.fromtimestamp(o["ts"], timezone.utc),
                               wait_for_system_duration=timedelta(0))
            windows = count_window("per_minute", decoded, clock, TumblingWindower(timedelta(seconds=60), EPOCH),
                                   lambda o: o["user"])

            def final(kv):
                user, (window_id, n) = kv
                start_ms = window_id * 60_000  # window ids count lengths from align_to (the epoch)
                return KafkaSinkMessage(user.encode(), orjson.dumps(
                    {"start": start_ms, "end": start_ms + 60_000, "value": n}))

            out = op.map("encode", windows.down, final)
    kop.output("out", out, brokers=[args.broker], topic=args.output)
    cli_main(flow, workers_per_process=args.workers)
    elapsed = time.perf_counter() - state["t0"]
    print("RESULT " + json.dumps({
        "scenario": f"bytewax-{args.scenario}", "consumed": state["n"], "elapsed_s": elapsed,
        "records_per_s": state["n"] / elapsed, "cpu_s": cpu() - state["cpu0"],
        "peak_rss_mb": peak_rss_mb(), "workers": args.workers}), flush=True)


if __name__ == "__main__":
    main()
