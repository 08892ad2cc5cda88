"""Quix Streams peer (runs in the peers venv): stateless enrich, count per key (RocksDB), EOS.

    python quix_app.py --scenario stateless|stateful|eos|windowed --broker B --input T --output O --group G --records N

Prints one ``RESULT {json}`` line: records/s from the first record to the end of the final
commit (app.stop() commits), CPU seconds in that window, peak RSS.
"""
import argparse
import json
import tempfile
import time

from measure import cpu, peak_rss_mb  # peers/ is the script directory
from quixstreams import Application


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("--scenario", "--broker", "--input", "--output", "--group"):
        p.add_argument(name, required=True)
    p.add_argument("--records", type=int, required=True)
    args = p.parse_args()
    app = Application(broker_address=args.broker, consumer_group=args.group, auto_offset_reset="earliest",
                      processing_guarantee="exactly-once" if args.scenario == "eos" else "at-least-once",
                      state_dir=tempfile.mkdtemp(prefix="quix-state-"), loglevel="WARNING")
    source = app.topic(args.input, value_deserializer="json")  # windows: the record timestamps (= ts)
    sink = app.topic(args.output, value_serializer="json")
    state = {"n": 0, "t0": None, "cpu0": 0.0}

    def seen(value):
        if state["t0"] is None:
            state["t0"], state["cpu0"] = time.perf_counter(), cpu()
        state["n"] += 1
        if state["n"] >= args.records:
            app.stop()
        return value

    sdf = app.dataframe(source).apply(seen)
    if args.scenario == "stateful":
        def count(value, st):
            total = st.get("count", 0) + 1
            st.set("count", total)
            return {"user": value["user"], "count": total}

        sdf = sdf.apply(count, stateful=True)
    elif args.scenario == "windowed":
        sdf = sdf.tumbling_window(60_000).count().final()
    else:
        sdf = sdf.apply(lambda value: {**value, "processed": True})
    sdf.to_topic(sink)
    app.run()
    elapsed = time.perf_counter() - state["t0"]
    print("RESULT " + json.dumps({
        "scenario": f"quix-{args.scenario}", "consumed": state["n"], "elapsed_s": elapsed,
        "records_per_s": state["n"] / elapsed, "cpu_s": cpu() - state["cpu0"],
        "peak_rss_mb": peak_rss_mb()}), flush=True)


if __name__ == "__main__":
    main()
