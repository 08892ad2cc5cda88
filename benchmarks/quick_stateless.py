"""Quick stateless throughput benchmark: raw Kafka clients vs streamkit on both drivers.

One run against one broker:

1. creates a fresh input topic (4 partitions) and fills it once with N JSON records
   (~100 bytes, key ``user-<i % 1000>``) using confluent-kafka;
2. runs each scenario in its own subprocess, one after another (never in parallel), each with
   a fresh output topic (4 partitions) and a fresh consumer group.  A scenario consumes the
   input, decodes each JSON value, adds a field, re-encodes it and produces it to its output
   topic; it exits once it has consumed N records and flushed its producer, printing one JSON
   line: ``elapsed_s`` from its first fetched record to after the final flush, the process CPU
   seconds spent in that window (all threads, so librdkafka's too), and peak RSS;
3. the parent checks that each output topic holds at least N records (high watermarks), and
   prints a table (median records/s over ``--repeat`` runs, min-max, CPU, RSS) and the ratios
   streamkit/raw per driver, and writes everything to ``--json``.

Scenarios:

- ``raw-confluent``: ``Consumer.consume(10000, 0.5)`` loop, orjson, ``Producer.produce``
  (``poll(0)`` per batch), flush at the end;
- ``raw-aiokafka``: ``AIOKafkaConsumer.getmany`` + orjson + ``AIOKafkaProducer.send`` (delivery
  not awaited per record), flush at the end;
- ``streamkit-aiokafka`` / ``streamkit-confluent``: an ``App`` with a ``Record`` type and an
  agent with ``sink=[output]`` that yields an enriched record, run in-process with
  ``async with app.running()``; measured to after a final checkpoint (flush and offset commit;
  the time of the subsequent ``app.stop()`` is reported separately as ``stop_s``);
- ``streamkit-<driver>-eos``: the same with ``processing_guarantee="exactly_once"`` (the final
  checkpoint commits the transaction, so the outputs are visible to read_committed readers).
- ``streamkit-<driver>-function`` / ``-columnar`` (``--scenarios``): the stateless agent as a
  plain ``def fn(order)``, and as a columnar agent over each fetched batch as a pyarrow
  RecordBatch (``columnar / function`` is the ratio printed for them).
- ``<streamkit scenario>+pure`` (``--pure-too`` adds one after each streamkit scenario): the same
  with ``STREAMKIT_PURE_PYTHON=1``, the per-record path's .py modules instead of the compiled
  ones (``compiled / pure`` is the ratio printed); each streamkit result says which build ran.

All producers use the same settings as streamkit's defaults (acks=all, linger 5 ms,
Java-compatible murmur2 partitioning) so the comparison is like for like.

Usage::

    python benchmarks/quick_stateless.py --broker 127.0.0.1:19092 --records 200000 --repeat 3
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from common import (  # benchmarks/ is on sys.path when run as a script
    admin_client,
    cpu_seconds,
    create_topic,
    delete_topics,
    final_checkpoint,
    peak_rss_mb,
    produce_all,
    rate_summary,
    run_scenario_process,
)

# streamkit scenario → (driver, processing guarantee, count per key in a table)
STREAMKIT = {f"streamkit-{driver}{suffix}": (driver, guarantee, stateful)
             for driver in ("aiokafka", "confluent")
             for suffix, guarantee, stateful in (("", "at_least_once", False), ("-eos", "exactly_once", False),
                                                 ("-stateful", "at_least_once", True),
                                                 ("-windowed", "at_least_once", "windowed"),
                                                 ("-function", "at_least_once", "function"),
                                                 ("-fold", "at_least_once", "fold"),
                                                 ("-columnar", "at_least_once", "columnar"))}
SCENARIOS = ("raw-confluent", "raw-aiokafka", "streamkit-aiokafka", "streamkit-confluent",
             "streamkit-aiokafka-eos", "streamkit-confluent-eos")  # the stateful ones: `python -m benchmarks run`
PURE = "+pure"  # scenario suffix: the same scenario on the pure-Python modules (streamkit/compiled.py)
PARTITIONS = 4
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "quick_stateless.json"
PRODUCER_ACKS = "all"
PRODUCER_LINGER_MS = 5


# -- measurement helpers (used inside scenario processes) -----------------------------------------


class Meter:
    """Wall and CPU time from the first fetched record to the end of the final flush."""

    def __init__(self) -> None:
        self.t0: float | None = None
        self.cpu0 = self.loop0 = 0.0
        self.t1 = 0.0
        self.cpu1 = self.loop1 = 0.0

    def first(self) -> None:
        if self.t0 is None:
            self.t0 = time.perf_counter()
            self.cpu0, self.loop0 = cpu_seconds(), time.thread_time()

    def done(self) -> None:
        self.t1 = time.perf_counter()
        self.cpu1, self.loop1 = cpu_seconds(), time.thread_time()

    def result(self, scenario: str, consumed: int, **extra: Any) -> dict[str, Any]:
        assert self.t0 is not None, "no record was consumed"
        elapsed = self.t1 - self.t0
        return {
            "scenario": scenario,
            "consumed": consumed,
            "elapsed_s": elapsed,
            "records_per_s": consumed / elapsed if elapsed > 0 else float("inf"),
            "cpu_s": self.cpu1 - self.cpu0,
            # the calling thread's CPU alone (the event loop's, where the per-record Python runs;
            # not librdkafka's threads): the figure a compiled per-record path moves
            "loop_cpu_s": self.loop1 - self.loop0,
            "cpu_total_s": cpu_seconds(),
            "peak_rss_mb": peak_rss_mb(),
            **extra,
        }


def enrich(doc: dict[str, Any]) -> dict[str, Any]:
    doc["processed"] = True
    return doc


# -- scenario a: raw confluent-kafka -------------------------------------------------------------


def run_raw_confluent(args: argparse.Namespace) -> dict[str, Any]:
    import orjson
    from confluent_kafka import Consumer, Producer

    consumer = Consumer({
        "bootstrap.servers": args.broker,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    })
    producer = Producer({
        "bootstrap.servers": args.broker,
        "acks": PRODUCER_ACKS,
        "linger.ms": PRODUCER_LINGER_MS,
        "partitioner": "murmur2_random",
    })
    consumer.subscribe([args.input])
    meter = Meter()
    loads, dumps, produce, out = orjson.loads, orjson.dumps, producer.produce, args.output
    consumed, n = 0, args.records
    deadline = time.monotonic() + args.timeout
    while consumed < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"timeout: consumed {consumed}/{n}")
        messages = consumer.consume(10000, 0.5)
        if not messages:
            continue
        meter.first()
        for msg in messages:
            if msg.error():
                raise SystemExit(f"consumer error: {msg.error()}")
            value = dumps(enrich(loads(msg.value())))
            while True:
                try:
                    produce(out, value, msg.key())
                    break
                except BufferError:  # local queue full: serve delivery reports and retry
                    producer.poll(0.05)
        consumed += len(messages)
        producer.poll(0)
    remaining = producer.flush(60)
    meter.done()
    if remaining:
        raise SystemExit(f"{remaining} records not delivered after flush")
    consumer.close()
    return meter.result("raw-confluent", consumed)


# -- scenario b: raw aiokafka --------------------------------------------------------------------


async def run_raw_aiokafka(args: argparse.Namespace) -> dict[str, Any]:
    import orjson
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(
        args.input, bootstrap_servers=args.broker, group_id=args.group, auto_offset_reset="earliest",
        session_timeout_ms=6000, heartbeat_interval_ms=1000,
    )
    from streamkit.transport.aiokafka_driver import MAX_BATCH_SIZE

    # the batch size streamkit gives aiokafka (aiokafka's own 16 KiB held its sends back): not flattered
    producer = AIOKafkaProducer(bootstrap_servers=args.broker, acks=PRODUCER_ACKS, linger_ms=PRODUCER_LINGER_MS,
                                max_batch_size=MAX_BATCH_SIZE)
    await producer.start()
    await consumer.start()
    meter = Meter()
    loads, dumps, send, out = orjson.loads, orjson.dumps, producer.send, args.output
    consumed, n = 0, args.records
    deadline = time.monotonic() + args.timeout
    try:
        while consumed < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"timeout: consumed {consumed}/{n}")
            batches = await consumer.getmany(timeout_ms=500, max_records=10000)
            if not batches:
                continue
            meter.first()
            for messages in batches.values():
                for msg in messages:
                    await send(out, dumps(enrich(loads(msg.value))), key=msg.key)  # enqueue only
                consumed += len(messages)
        await producer.flush()
        meter.done()
    finally:
        await consumer.stop()
        await producer.stop()
    return meter.result("raw-aiokafka", consumed)


# -- scenarios c/d: streamkit --------------------------------------------------------------------


async def run_streamkit(args: argparse.Namespace, scenario: str) -> dict[str, Any]:
    from pipeline import build_app

    driver, guarantee, stateful = STREAMKIT[scenario]
    meter = Meter()
    done = asyncio.Event()
    n = args.records
    state = {"consumed": 0}

    def on_record(_order: Any) -> None:
        if state["consumed"] == 0:
            meter.first()
        state["consumed"] += 1
        if state["consumed"] >= n:  # set when the n-th record is taken; the sink queues it next
            done.set()

    def on_records(count: int) -> None:  # a columnar agent's batch
        if state["consumed"] == 0:
            meter.first()
        state["consumed"] += count
        if state["consumed"] >= n:
            done.set()

    app, enrich_orders = build_app(group=args.group, broker=args.broker, driver=driver, input_topic=args.input,
                                   output_topic=args.output, guarantee=guarantee, stateful=stateful,
                                   on_record=on_record, on_records=on_records)

    async with app.running():
        try:
            await asyncio.wait_for(done.wait(), args.timeout)
        except asyncio.TimeoutError:
            raise SystemExit(f"timeout: consumed {state['consumed']}/{n}") from None
        await final_checkpoint(app)  # flush + offsets, or the transaction's commit
        meter.done()
        stop_started = time.perf_counter()
    stop_s = time.perf_counter() - stop_started
    from streamkit.compiled import describe

    return meter.result(scenario, state["consumed"], stop_s=stop_s, restarts=enrich_orders.restarts, build=describe())


def scenario_main(args: argparse.Namespace) -> None:
    import logging

    # WARNING and above reach stderr with their level, so the parent can collect them
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.scenario.startswith("raw-"):  # the ceilings get the collector setting workers use
        from streamkit.runtime import gc_tuning
        from streamkit.settings import Settings

        gc_tuning.acquire(Settings().gc_young_threshold)
    if args.scenario == "raw-confluent":
        result = run_raw_confluent(args)
    elif args.scenario == "raw-aiokafka":
        result = asyncio.run(run_raw_aiokafka(args))
    elif args.scenario in STREAMKIT:
        result = asyncio.run(run_streamkit(args, args.scenario))
    else:
        raise SystemExit(f"unknown scenario {args.scenario!r}")
    print("RESULT " + json.dumps(result), flush=True)


# -- parent: topics, data, orchestration, report -------------------------------------------------


def fill_input(broker: str, topic: str, n: int, keys: int = 1000, per_second: int = 1000) -> float:
    """``n`` records over ``keys`` users (``user-<i % keys>``, also the record key), ``per_second``
    of event time each second from now (Kafka 4 refuses timestamps over an hour ahead:
    ``log.message.timestamp.after.max.ms``)."""
    import orjson

    now = time.time()  # event time from now (the record timestamps too)
    records = ((f"user-{i % keys}".encode(),
                orjson.dumps({"id": i, "user": f"user-{i % keys}", "amount": 12.5, "ts": now + i / per_second,
                              "note": "benchmark-record"}), int((now + i / per_second) * 1000)) for i in range(n))
    return produce_all(broker, topic, records, "input records", **{
        "linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 500000})


def topic_count(broker: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"bench-count-{uuid.uuid4().hex[:8]}"})
    try:
        total = 0
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def run_scenario(args: argparse.Namespace, scenario: str, input_topic: str, tag: str) -> dict[str, Any]:
    output = f"bench-out-{tag}"
    group = f"bench-{tag}"
    create_topic(args.admin, output, PARTITIONS)
    pure = scenario.endswith(PURE)
    result = run_scenario_process(str(Path(__file__).resolve()), scenario.removesuffix(PURE), [
        "--broker", args.broker, "--records", str(args.records), "--input", input_topic, "--output", output,
        "--group", group, "--timeout", str(args.timeout)], args.timeout,
        env_extra={"STREAMKIT_PURE_PYTHON": "1"} if pure else None)
    result["scenario"] = scenario
    result["output_records"] = topic_count(args.broker, output)
    result["output_ok"] = result["output_records"] >= args.records
    # streamkit creates <group>-dlq, <group>-__leader and <group>-replies
    result["topics"] = [output] + ([f"{group}-dlq", f"{group}-__leader", f"{group}-replies"]
                                   if scenario.startswith("streamkit") else [])
    return result


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok, summary = rate_summary(runs)
    if ok:
        summary["cpu_us_per_record"] = statistics.median(r["cpu_s"] / r["consumed"] * 1e6 for r in ok)
        summary["loop_cpu_us_per_record"] = statistics.median(r["loop_cpu_s"] / r["consumed"] * 1e6 for r in ok)
        summary["all_outputs_complete"] = all(r["output_ok"] for r in runs)
    return summary


def print_table(summary: dict[str, dict[str, Any]], ratios: dict[str, float | None]) -> None:
    header = (f"{'scenario':<34}{'median rec/s':>14}{'min-max rec/s':>22}{'CPU s':>8}{'CPU us/rec':>12}"
              f"{'loop us/rec':>13}{'peak RSS MB':>13}  output")
    print(header)
    print("-" * len(header))
    for name, s in summary.items():
        if not s.get("ok_runs"):
            print(f"{name:<34}{'FAILED':>14}  {s.get('errors')}")
            continue
        span = f"{s['min_rps']:,.0f}-{s['max_rps']:,.0f}"
        print(f"{name:<34}{s['median_rps']:>14,.0f}{span:>22}{s['median_cpu_s']:>8.2f}{s['cpu_us_per_record']:>12.1f}"
              f"{s['loop_cpu_us_per_record']:>13.2f}{s['max_peak_rss_mb']:>13.1f}"
              f"  {'complete' if s['all_outputs_complete'] else 'INCOMPLETE'}")
    print()
    for name, ratio in ratios.items():
        print(f"{name:<52} {'n/a' if ratio is None else f'{ratio:.2f}'}")


def parent_main(args: argparse.Namespace) -> None:
    run_id = uuid.uuid4().hex[:8]
    input_topic = f"bench-in-{run_id}"
    known = list(SCENARIOS) + [s for s in STREAMKIT if s not in SCENARIOS]
    known = [v for s in known for v in ((s, s + PURE) if s in STREAMKIT else (s,))]
    asked = args.scenarios.split(",")
    unknown = [s for s in asked if s not in known]
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}: pick from {known}")
    if args.pure_too:
        asked += [s + PURE for s in asked if s in STREAMKIT]
    scenarios = [s for s in known if s in asked]  # each +pure right after its compiled run: A/B/A/B
    print(f"broker {args.broker}, {args.records} records, {args.repeat} repeats, run {run_id}", flush=True)
    args.admin = admin_client(args.broker)  # one client, kept alive for all its futures
    create_topic(args.admin, input_topic, PARTITIONS)
    fill_s = fill_input(args.broker, input_topic, args.records)
    print(f"filled {input_topic} with {topic_count(args.broker, input_topic)} records in {fill_s:.1f}s", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in scenarios}
    created: list[str] = [input_topic]
    try:
        for rep in range(args.repeat):  # interleaved, so drift on the broker hits every scenario alike
            for scenario in scenarios:
                tag = f"{run_id}-{scenario}-{rep}"
                result = run_scenario(args, scenario, input_topic, tag)
                created += result.pop("topics")
                runs[scenario].append(result)
                if "error" in result:
                    print(f"  {scenario} #{rep + 1}: FAILED {result['error']}\n{result['stderr']}", flush=True)
                else:
                    print(f"  {scenario} #{rep + 1}: {result['records_per_s']:,.0f} rec/s, {result['elapsed_s']:.2f}s, "
                          f"cpu {result['cpu_s']:.2f}s, rss {result['peak_rss_mb']:.0f} MB, "
                          f"out {result['output_records']}"
                          + (f", stop {result['stop_s']:.2f}s" if "stop_s" in result else ""), flush=True)
    finally:
        if not args.keep_topics:
            delete_topics(args.admin, created)
    summary = {s: summarize(r) for s, r in runs.items()}

    def ratio(a: str, b: str) -> float | None:
        sa, sb = summary.get(a, {}), summary.get(b, {})
        if sa.get("ok_runs") and sb.get("ok_runs"):
            return sa["median_rps"] / sb["median_rps"]
        return None

    ratios = {
        "streamkit-aiokafka / raw-aiokafka": ratio("streamkit-aiokafka", "raw-aiokafka"),
        "streamkit-confluent / raw-confluent": ratio("streamkit-confluent", "raw-confluent"),
        "exactly-once / at-least-once (aiokafka)": ratio("streamkit-aiokafka-eos", "streamkit-aiokafka"),
        "exactly-once / at-least-once (confluent)": ratio("streamkit-confluent-eos", "streamkit-confluent"),
        "columnar / function (confluent)": ratio("streamkit-confluent-columnar", "streamkit-confluent-function"),
        "columnar / function (aiokafka)": ratio("streamkit-aiokafka-columnar", "streamkit-aiokafka-function"),
        "columnar confluent / raw-confluent": ratio("streamkit-confluent-columnar", "raw-confluent"),
    }
    for name in scenarios:  # the compiled per-record path against the pure-Python one, same run
        if name.endswith(PURE):
            base = name.removesuffix(PURE)
            ratios[f"{base}: compiled / pure"] = ratio(base, name)
            if summary.get(base, {}).get("ok_runs") and summary.get(name, {}).get("ok_runs"):
                ratios[f"{base}: loop CPU pure / compiled"] = (summary[name]["loop_cpu_us_per_record"]
                                                               / summary[base]["loop_cpu_us_per_record"])
            raw = "raw-" + STREAMKIT[base][0]
            ratios[f"{base}{PURE} / {raw}"] = ratio(name, raw)
    ratios = {name: value for name, value in ratios.items() if value is not None or "pure" not in name}
    print()
    print_table(summary, ratios)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    import platform

    out.write_text(json.dumps({
        "benchmark": "quick_stateless",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "broker": args.broker,
        "records": args.records,
        "repeat": args.repeat,
        "partitions": PARTITIONS,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "input_fill_s": fill_s,
        "summary": summary,
        "ratios": ratios,
        "runs": runs,
    }, indent=2))
    print(f"\nresults written to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="127.0.0.1:9092", help="HOST:PORT of the Kafka broker")
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="where to write the results")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per scenario run")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the benchmark topics")
    parser.add_argument("--pure-too", action="store_true",
                        help="run each streamkit scenario also on the pure-Python modules (STREAMKIT_PURE_PYTHON=1)")
    # internal: run one scenario (the parent starts these as subprocesses)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenario:
        scenario_main(args)
    else:
        parent_main(args)


if __name__ == "__main__":
    main()
