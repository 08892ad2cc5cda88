"""Rebalance gap: how long partitions stop being processed when a second worker joins mid-run.

    python benchmarks/rebalance_gap.py --broker 127.0.0.1:29092 [--rate 2000] [--scenarios ...]

A generator feeds an 8-partition topic at a steady ``--rate`` (paced every 10 ms). Worker A
(the counting app as users write it: ``counts[key] += 1`` in a table without ``partitions=``,
RocksDB store) runs alone for ``--warmup`` seconds, then worker B joins. Each worker notes, per
input partition, every pause between two processed records longer than 50 ms. Afterwards:

* ``stayed``: partitions A owned before the join and still owned after it. Their longest pause
  after the join is what a rebalance costs the work that did not move: the whole rebalance
  under eager (A gives up everything, then takes its share back), near nothing under an
  incremental protocol.
* ``moved``: partitions that went to B: from A's last record to B's first (revoke, commit,
  recovery of B's table partitions, first fetch), for either protocol.

Scenarios: ``<driver>-<rebalancing>``; aiokafka speaks only eager. What ``auto`` chose on this
broker (KIP-848, cooperative-sticky) is in the result. Prints one JSON document.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from common import ROOT, admin_client, client_conf, create_topic, delete_topics

PARTITIONS = 8
PAUSE_S = 0.05  # a pause between two records of a partition shorter than this is not noted
IDLE_EXIT_S = 3.0  # a worker that processed records and then saw none for this long is done
NOTHING_EXIT_S = 60.0  # a worker that processed nothing for this long after starting is done too
SCENARIOS = ["aiokafka-eager", "confluent-eager", "confluent-auto"]


async def worker_main(args: argparse.Namespace) -> None:
    import streamkit as sk

    app = sk.App(args.group, broker=args.broker, driver=args.driver, rebalancing=args.rebalancing,
                 web_enabled=False, data_dir=args.data_dir, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                 commit_interval=0.5)
    words = app.topic(args.input, key_type=str, value_type=bytes)
    counts = app.Table("counts", default=int)
    last: dict[int, float] = {}
    first: dict[int, float] = {}
    pauses: dict[int, list[tuple[float, float]]] = {}

    @app.agent(words)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1
            now = time.time()
            p = event.partition
            before = last.get(p)
            if before is None:
                first[p] = now
            elif now - before > PAUSE_S:
                pauses.setdefault(p, []).append((before, now))
            last[p] = now

    assignments: list[tuple[float, list[int]]] = []
    async with app.running():
        print("STARTED", flush=True)
        started = time.time()
        mine: list[int] = []
        while True:
            await asyncio.sleep(0.02)
            now = time.time()
            current = sorted(tp.partition for tp in app.runtime.assigned if tp.topic == args.input)
            if current != mine:
                mine = current
                assignments.append((now, current))
            newest = max(last.values(), default=None)
            if newest is not None and now - newest > IDLE_EXIT_S:
                break
            if newest is None and now - started > NOTHING_EXIT_S:
                break
        protocol = app.runtime.group_protocol.describe()
    print("RESULT " + json.dumps({"first": first, "last": last, "pauses": pauses, "assignments": assignments,
                                  "protocol": protocol}), flush=True)


def generate(broker: str, topic: str, rate: int, seconds: float, stop: threading.Event) -> int:
    from confluent_kafka import Producer

    # murmur2: the partitioner of Kafka's Java clients, kafka-python, aiokafka and streamkit
    producer = Producer(client_conf(broker, **{"linger.ms": 5, "partitioner": "murmur2_random"}))
    sent, began = 0, time.monotonic()
    while not stop.is_set() and time.monotonic() - began < seconds:
        due = int((time.monotonic() - began) * rate)
        for i in range(sent, due):
            producer.produce(topic, key=f"user-{i % 1000}".encode(), value=b"x")
        sent = max(sent, due)
        producer.poll(0)
        time.sleep(0.01)
    producer.flush(30)
    return sent


def spawn(args: argparse.Namespace, driver: str, rebalancing: str, group: str, topic: str, data_dir: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--role", "worker", "--broker", args.broker,
           "--driver", driver, "--rebalancing", rebalancing, "--group", group, "--input", topic, "--data-dir", data_dir]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()  # "STARTED" once the worker runs (bounded by its own startup timeout)
    if not line.startswith("STARTED"):
        proc.kill()
        raise RuntimeError(f"worker did not start: {line!r} {proc.stderr.read()[-2000:]}")
    return proc


def result_of(proc: Any, timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"worker exit {proc.returncode}: {err[-2000:]}")
    return json.loads(line[len("RESULT "):])


def owned_at(result: dict[str, Any], t: float) -> set[int]:
    before = [parts for when, parts in result["assignments"] if when <= t]
    return set(before[-1]) if before else set()


def analyse(a: dict[str, Any], b: dict[str, Any], joined: float) -> dict[str, Any]:
    settled = max(when for when, _ in b["assignments"])  # B's last assignment change
    before, after = owned_at(a, joined), owned_at(a, settled)
    stayed = sorted(before & after)
    moved = sorted(before - after)

    def longest_pause(p: int) -> float:
        spans = [end - start for start, end in a["pauses"].get(str(p), []) if end >= joined]
        return max(spans, default=0.0)

    handover = [b["first"][str(p)] - a["last"][str(p)] for p in moved if str(p) in b["first"] and str(p) in a["last"]]
    if len(handover) < len(moved):  # B never processed some partition it was given
        return {"protocol": a["protocol"], "stayed": stayed, "moved": moved,
                "error": f"worker B processed {len(handover)} of the {len(moved)} partitions it took"}
    return {"protocol": a["protocol"], "stayed": stayed, "moved": moved,
            # None when nothing stayed (the dev broker's eager joins sometimes hand everything over)
            "stayed_longest_pause_s": round(max(longest_pause(p) for p in stayed), 3) if stayed else None,
            "moved_longest_handover_s": round(max(handover, default=0.0), 3)}


def run_scenario(args: argparse.Namespace, scenario: str) -> dict[str, Any]:
    driver, rebalancing = scenario.split("-", 1)
    tag = uuid.uuid4().hex[:8]
    topic, group = f"gap-in-{tag}", f"gap-{tag}"
    admin = admin_client(args.broker)
    create_topic(admin, topic, PARTITIONS)
    stop = threading.Event()
    sent: list[int] = []
    with tempfile.TemporaryDirectory() as data:
        a = spawn(args, driver, rebalancing, group, topic, f"{data}/a")
        feeder = threading.Thread(target=lambda: sent.append(generate(args.broker, topic, args.rate,
                                                                      args.warmup + args.after, stop)))
        feeder.start()
        b = None
        try:
            time.sleep(args.warmup)  # a benchmark's schedule, not a test's wait
            joined = time.time()
            b = spawn(args, driver, rebalancing, group, topic, f"{data}/b")
            feeder.join(args.warmup + args.after + 60)
            ra, rb = result_of(a, 120), result_of(b, 120)
        finally:
            stop.set()
            for proc in (a, b):
                if proc is not None and proc.poll() is None:
                    proc.kill()
            delete_topics(admin, [topic, f"{group}-counts-changelog", f"{group}-dlq", f"{group}-__leader",
                                  f"{group}-replies", f"{group}-__cluster"])
    if os.environ.get("GAP_DUMP"):
        print(json.dumps({"joined": joined, "a": ra, "b": rb}), file=sys.stderr)
    return {"scenario": scenario, "records": sent[0] if sent else None, **analyse(ra, rb, joined)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--rate", type=int, default=2000, help="records/s fed to the 8 partitions")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds worker A runs alone")
    parser.add_argument("--after", type=float, default=15.0, help="seconds of input after B joins")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--role", default="parent", choices=["parent", "worker"], help=argparse.SUPPRESS)
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--rebalancing", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "worker":
        asyncio.run(worker_main(args))
        return
    results = [run_scenario(args, s) for s in args.scenarios.split(",")]
    print(json.dumps({"broker": args.broker, "rate": args.rate, "results": results}, indent=2))


if __name__ == "__main__":
    main()
