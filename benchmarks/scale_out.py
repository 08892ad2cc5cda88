"""Scale-out: the stateless pipeline in 1 worker process vs 2, on the same pre-filled topic.

    python benchmarks/scale_out.py --broker 127.0.0.1:19092 --driver confluent --records 1000000

Each run starts 1, then 2 processes in one fresh consumer group over the same input topic. A
worker takes its first record only once it owns its share of the partitions (so one that joined
first does not race ahead alone). Every worker records when its assignment last changed and,
every 50 ms, how many records it has processed. The rate counts only the window in which the group is stable and every worker
is still busy: from the last assignment change of any worker to the moment the first worker
runs out of records (after that its partner works alone, which says nothing about scaling).
So group joins and the tail are excluded alike for 1 and 2 workers, and the ratio compares
steady states.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from common import ROOT, admin_client, create_topic, delete_topics

PARTITIONS = 4
IDLE_EXIT_S = 2.0  # a worker that processed records and then saw none for this long is done


async def worker_main(args: argparse.Namespace) -> None:
    from pipeline import build_app

    state = {"n": 0, "last": 0.0}

    def on_record(_order: Any) -> None:
        state["n"] += 1

    app: Any = None

    async def my_share_assigned() -> None:
        """Start once this worker owns its share: a worker that started alone never races
        ahead on all partitions before its partner joins (bounded: start anyway after 60 s)."""
        share = PARTITIONS // args.workers
        for _ in range(1200):
            if sum(1 for tp in app.runtime.assigned if tp.topic == args.input) == share:
                return
            await asyncio.sleep(0.05)

    app, _ = build_app(group=args.group, broker=args.broker, driver=args.driver, input_topic=args.input,
                       output_topic=args.output, on_record=on_record, before_start=my_share_assigned)
    samples: list[tuple[float, int]] = []
    assignment: frozenset = frozenset()
    changes: list[tuple[float, int]] = [(time.time(), 0)]  # (when, how many input partitions)
    async with app.running():
        while True:
            await asyncio.sleep(0.05)
            now = time.time()
            mine = frozenset(tp for tp in app.runtime.assigned if tp.topic == args.input)
            if mine != assignment:
                assignment = mine
                changes.append((now, len(mine)))
            if not samples or samples[-1][1] != state["n"]:
                state["last"] = now
            samples.append((now, state["n"]))
            if state["n"] and now - state["last"] > IDLE_EXIT_S:
                break
    print("RESULT " + json.dumps({"assignments": changes, "last_record_at": state["last"], "processed": state["n"],
                                  "samples": samples}),
          flush=True)


def processed_at(samples: list[list[float]], t: float) -> float:
    """Records processed by time ``t`` (linear between samples)."""
    before = [s for s in samples if s[0] <= t]
    after = [s for s in samples if s[0] > t]
    if not before:
        return 0.0
    if not after:
        return before[-1][1]
    (t0, n0), (t1, n1) = before[-1], after[0]
    return n0 + (n1 - n0) * (t - t0) / (t1 - t0)


def measure(broker: str, driver: str, input_topic: str, workers: int, timeout: float = 600.0) -> dict[str, Any]:
    """One run of ``workers`` processes; the group's records/s in its stable window."""
    tag = uuid.uuid4().hex[:8]
    output, group = f"scale-out-{tag}", f"scale-{tag}"
    admin = admin_client(broker)
    create_topic(admin, output, PARTITIONS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--role", "worker", "--broker", broker, "--driver", driver,
           "--input", input_topic, "--output", output, "--group", group, "--workers", str(workers)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(workers)]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
            if proc.returncode != 0 or line is None:
                return {"workers": workers, "error": f"exit {proc.returncode}", "stderr": err[-2000:]}
            results.append(json.loads(line[len("RESULT "):]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        delete_topics(admin, [output, f"{group}-dlq", f"{group}-__leader", f"{group}-replies"])
    # The window ends when the first worker runs dry (its partner's later rebalance, when it
    # leaves, is after the window); it starts at the last assignment change before that.
    end = min(r["last_record_at"] for r in results)
    last_change = [max((c for c in r["assignments"] if c[0] <= end), key=lambda c: c[0]) for r in results]
    start = max(t for t, _ in last_change)
    partitions = [n for _, n in last_change]
    if end - start < 0.5:
        return {"workers": workers, "error": f"stable window too short ({end - start:.2f}s)", "partitions": partitions}
    records = sum(processed_at(r["samples"], end) - processed_at(r["samples"], start) for r in results)
    return {"workers": workers, "records_per_s": records / (end - start), "window_s": end - start,
            "window_records": records, "processed": [r["processed"] for r in results], "partitions": partitions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--driver", default="confluent", choices=["confluent", "aiokafka"])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--role", default="parent", choices=["parent", "worker"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "worker":
        asyncio.run(worker_main(args))
        return
    from quick_stateless import fill_input

    input_topic = f"scale-in-{uuid.uuid4().hex[:8]}"
    admin = admin_client(args.broker)
    create_topic(admin, input_topic, PARTITIONS)
    try:
        fill_input(args.broker, input_topic, args.records)
        one, two = measure(args.broker, args.driver, input_topic, 1), measure(args.broker, args.driver, input_topic, 2)
    finally:
        delete_topics(admin, [input_topic])
    print(json.dumps({"one": one, "two": two, "ratio": two.get("records_per_s", 0) / one["records_per_s"]
                      if one.get("records_per_s") else None}, indent=2))


if __name__ == "__main__":
    main()
