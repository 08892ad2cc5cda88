"""End-to-end latency of the stateless pipeline at a fixed input rate.

    python benchmarks/latency.py --broker 127.0.0.1:19092 --driver confluent --rate 50000 [--seconds 20]

Three processes, so none of them steals the others' interpreter: the streamkit worker
(``pipeline.build_app``, at-least-once), a load generator that produces ``--rate`` records/s
(paced every millisecond) whose ``ts`` field is the wall-clock time at produce, and this
process, which reads the output topic and takes ``receipt time - ts`` for every record. The
first 3 seconds (a quarter of a shorter run) are left out. The generator starts once the worker owns all input
partitions. Reports p50/p90/p99/p99.9/max in milliseconds the rate actually achieved, and the CPU cores worker, generator
and reader used together (of the machine's; the broker's come on top).
`python -m benchmarks run` runs it at half the stateless throughput it measured.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from common import ROOT, admin_client, client_conf, create_topic, delete_topics

HERE = Path(__file__).resolve().parent
PARTITIONS = 4


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# -- the worker process ----------------------------------------------------------------------------


async def worker_main(args: argparse.Namespace) -> None:
    from pipeline import build_app

    app, _ = build_app(group=args.group, broker=args.broker, driver=args.driver, input_topic=args.input,
                       output_topic=args.output)
    async with app.running():
        while {tp for tp in app.runtime.assigned if tp.topic == args.input} != {
                (args.input, p) for p in range(PARTITIONS)}:
            await asyncio.sleep(0.05)
        print("READY", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it


# -- the generator process -------------------------------------------------------------------------


def generator_main(args: argparse.Namespace) -> None:
    import orjson
    from confluent_kafka import Producer

    producer = Producer(client_conf(args.broker, **{"partitioner": "murmur2_random", "linger.ms": 1, "acks": "all"}))
    started = time.perf_counter()
    end = started + args.seconds
    sent, dumps, produce, now_wall = 0, orjson.dumps, producer.produce, time.time
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        due = int((now - started) * args.rate)
        while sent < due:
            key = f"user-{sent % 1000}"
            try:
                produce(args.input, dumps({"id": sent, "user": key, "amount": 12.5, "ts": now_wall()}), key.encode())
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(30)
    print("RESULT " + json.dumps({"sent": sent, "seconds": time.perf_counter() - started}), flush=True)


# -- the measuring parent --------------------------------------------------------------------------


def read_latencies(broker: str, topic: str, expected: Callable[[], int | None], until: float) -> list[tuple[float, float]]:
    """(produced-at, latency seconds) of every output record, read as soon as it is there, until
    ``expected()`` (None while the generator still runs) records have come or ``until``."""
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "fetch.wait.max.ms": 5, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])  # no group join
    out: list[tuple[float, float]] = []
    loads = orjson.loads
    try:
        while time.time() < until:
            goal = expected()
            if goal is not None and len(out) >= goal:
                break
            first = consumer.poll(0.1)  # consume(n, t) alone would wait for n records or t
            if first is None:
                continue
            batch = [first, *consumer.consume(10000, 0)]
            received = time.time()
            for m in batch:
                if m.error() is None:
                    ts = loads(m.value())["ts"]
                    out.append((ts, received - ts))
    finally:
        consumer.close()
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds of a live process, from /proc/<pid>/stat (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(broker: str, driver: str, rate: int, seconds: float, warmup: float = 3.0,
            timeout: float = 120.0) -> dict[str, Any]:
    """Run worker + generator on fresh topics; return the latency percentiles."""
    tag = uuid.uuid4().hex[:8]
    input_topic, output_topic, group = f"lat-in-{tag}", f"lat-out-{tag}", f"lat-{tag}"
    admin = admin_client(broker)
    for topic in (input_topic, output_topic):
        create_topic(admin, topic, PARTITIONS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    base = [sys.executable, str(Path(__file__).resolve()), "--broker", broker, "--input", input_topic]
    worker = subprocess.Popen(base + ["--role", "worker", "--driver", driver, "--output", output_topic,
                                      "--group", group], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = worker.stdout.readline() if worker.stdout else ""  # READY once it owns every input partition
        if line.strip() != "READY":
            raise RuntimeError(f"worker did not start: {line!r} {worker.stderr.read()[-2000:] if worker.stderr else ''}")
        generator = subprocess.Popen(base + ["--role", "generator", "--rate", str(rate), "--seconds", str(seconds)],
                                     stdout=subprocess.PIPE, text=True, env=env)
        wall0, reader0, worker0, children0 = time.perf_counter(), time.process_time(), process_cpu(worker.pid), children_cpu()
        sent: list[int] = []

        def expected() -> int | None:
            if not sent and generator.poll() is not None:
                out = generator.stdout.read() if generator.stdout else ""
                sent.append(json.loads(out.split("RESULT ", 1)[1])["sent"])
            return sent[0] if sent else None

        latencies = read_latencies(broker, output_topic, expected, time.time() + seconds + timeout)
        generator.wait(timeout=timeout)
        expected()
        used = (time.process_time() - reader0) + (process_cpu(worker.pid) - worker0) + (children_cpu() - children0)
        cores = used / (time.perf_counter() - wall0)  # worker + generator + reader, in the measured window
    finally:
        if worker.stdin:
            worker.stdin.close()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
        delete_topics(admin, [input_topic, output_topic, f"{group}-dlq", f"{group}-__leader", f"{group}-replies"])
    start = min(ts for ts, _ in latencies) + min(warmup, seconds / 4) if latencies else 0.0
    kept = sorted(lat * 1000 for ts, lat in latencies if ts >= start)
    if not kept:
        return {"error": "no output records", "sent": sent[0], "received": len(latencies)}
    return {"driver": driver, "rate": rate, "seconds": seconds, "sent": sent[0], "received": len(latencies),
            "measured": len(kept), "p50_ms": percentile(kept, 0.50), "p90_ms": percentile(kept, 0.90),
            "p99_ms": percentile(kept, 0.99), "p999_ms": percentile(kept, 0.999), "max_ms": kept[-1],
            "complete": len(latencies) >= sent[0],
            "harness_cpu_cores": cores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--driver", default="confluent", choices=["confluent", "aiokafka"])
    parser.add_argument("--rate", type=int, default=20000, help="input records per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--role", default="parent", choices=["parent", "worker", "generator"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "worker":
        asyncio.run(worker_main(args))
    elif args.role == "generator":
        generator_main(args)
    else:
        print(json.dumps(measure(args.broker, args.driver, args.rate, args.seconds), indent=2))


if __name__ == "__main__":
    main()
