"""faust-streaming peer (runs in the peers venv): stateless enrich, count per key (RocksDB), EOS.

    python faust_app.py --scenario stateless|stateful|eos|windowed --broker B --input T --output O --group G --records N

Prints one ``RESULT {json}`` line once N records are processed and the producer is flushed (and,
for a table, the changelog sent), then exits.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import faust
import orjson
from measure import cpu, peak_rss_mb  # peers/ is the script directory

p = argparse.ArgumentParser()
for name in ("--scenario", "--broker", "--input", "--output", "--group"):
    p.add_argument(name, required=True)
p.add_argument("--records", type=int, required=True)
args, _ = p.parse_known_args()

app = faust.App(args.group, broker=f"kafka://{args.broker}",
                store="rocksdb://" if args.scenario in ("stateful", "windowed") else "memory://",
                datadir=tempfile.mkdtemp(prefix="faust-data-"), topic_partitions=4, web_enabled=False,
                processing_guarantee="exactly_once" if args.scenario == "eos" else "at_least_once",
                consumer_auto_offset_reset="earliest", broker_session_timeout=6.0, broker_heartbeat_interval=1.0)
source = app.topic(args.input, value_serializer="raw", key_serializer="raw")
sink = app.topic(args.output, value_serializer="raw", key_serializer="raw")
counts = app.Table("counts", default=int, partitions=4) if args.scenario == "stateful" else None


def emit_closed(key, value) -> None:  # faust calls it when a window expires: the final count
    sink.send_soon(key=key[0].encode() if isinstance(key[0], str) else key[0],
                   value=orjson.dumps({"start": key[1][0], "end": key[1][1], "value": value}))


per_minute = (app.Table("per-minute", default=int, partitions=4, on_window_close=emit_closed)
              .tumbling(60, expires=60).relative_to_stream() if args.scenario == "windowed" else None)
state = {"n": 0, "t0": None, "cpu0": 0.0}


async def finish() -> None:
    await app.producer.flush()
    elapsed = time.perf_counter() - state["t0"]
    print("RESULT " + json.dumps({
        "scenario": f"faust-{args.scenario}", "consumed": state["n"], "elapsed_s": elapsed,
        "records_per_s": state["n"] / elapsed, "cpu_s": cpu() - state["cpu0"],
        "peak_rss_mb": peak_rss_mb()}), flush=True)
    sys.stdout.flush()
    os._exit(0)


@app.agent(source)
async def process(stream):
    async for event in stream.events():
        if state["t0"] is None:
            state["t0"], state["cpu0"] = time.perf_counter(), cpu()
        doc = orjson.loads(event.value)
        if per_minute is not None:  # faust's relative_to_field needs a Record: the event's timestamp is ts
            per_minute[doc["user"]] += 1
            state["n"] += 1
            if state["n"] >= args.records:
                await finish()
            continue
        if counts is not None:
            counts[doc["user"]] += 1
            out = {"user": doc["user"], "count": counts[doc["user"]]}
        else:
            doc["processed"] = True
            out = doc
        await sink.send(key=event.key, value=orjson.dumps(out))
        state["n"] += 1
        if state["n"] >= args.records:
            await finish()


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "worker", "-l", "warn", "--without-web"]  # web_enabled=False alone is overridden
    app.main()
