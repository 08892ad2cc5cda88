"""End-to-end latency of the stateless pipeline (``--stateful``: a count per user in a table too) at a fixed input rate.

    python benchmarks/latency.py --broker 127.0.0.1:19092 --driver confluent --rate 50000 [--seconds 20] [--stateful]

Three processes, so none of them steals the others' interpreter: the streamkit worker
(``pipeline.build_app``, at-least-once), a load generator that produces ``--rate`` records/s
(paced every millisecond) whose ``ts`` field is the wall-clock time at produce, and this
process, which reads the output topic and takes ``receipt time - ts`` for every record. The
first 3 seconds (a quarter of a shorter run) are left out. The generator starts once the worker owns all input
partitions. Reports p50/p90/p99/p99.9/max in milliseconds the rate actually achieved, and the CPU cores worker, generator
and reader used together (of the machine's; the broker's come on top).
`python -m benchmarks run` runs it at a third and at half of the stateless throughput it measured.

``--peer quix``: Quix Streams as the worker instead (``peers/quix_latency.py``, the stateless
enrichment of the throughput peer, run by the peers' interpreter: ``--peers-python``, default
the harness's peers venv, created on first use), fed by the same generator and timed by the same
reader, so the two frameworks' percentiles at one rate compare. A framework that cannot keep up
says so: ``offered_rps`` (what the generator sent per second), ``output_rps`` (records out / first
receipt → last receipt) and ``sustained`` (every record came out, at 90% of the offered rate or more).

Where the time goes: both topics are created with ``message.timestamp.type=LogAppendTime``, so
every record carries the broker's clock at the append; the worker notes when its agent takes
each record (its input append time and the wall clock, written to a file at exit), and the
reader notes the output's append time. Per record that splits the latency into five stages:
``produce`` (generator's produce → input append: its linger and request), ``to_fetch`` (input
append → the fetched batch reaches the router: fetch wait and fetch), ``queue_to_agent`` (→ the
agent takes it: decode, the inbox, the records ahead of it), ``agent_to_append`` (the agent,
encode, the worker's producer linger and request → output append) and ``to_reader`` (output
append → the reader's receipt). The router's hand-over is timed by wrapping it in this worker
process (one clock read per batch), not by the runtime. Each stage's p50/p99, and its mean share among the records at
or above the total's p99 (what the tail is made of). Millisecond broker clocks: ±1 ms per stage.
"""
from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from array import array
from pathlib import Path
from typing import Any, Callable

from common import ROOT, admin_client, client_conf, create_topic, delete_topics

HERE = Path(__file__).resolve().parent
PARTITIONS = 4


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# -- the worker process ----------------------------------------------------------------------------


async def worker_main(args: argparse.Namespace) -> None:
    import orjson
    from pipeline import build_app

    import streamkit as sk

    # Columns of numbers, not tuples: hundreds of thousands of tuples would make the worker's
    # full garbage collections longer, the very pauses this measures.
    ids, appended, took, partitions, offsets = (array("q"), array("q"), array("d"), array("q"), array("q"))
    fetched_partitions, fetched_lasts, fetched_at = array("q"), array("q"), array("d")
    now = time.time

    def on_record(order: Any) -> None:
        event = sk.current_event()
        ids.append(order.id)
        appended.append(event.timestamp)
        took.append(now())
        partitions.append(event.partition)
        offsets.append(event.offset)

    app, _ = build_app(group=args.group, broker=args.broker, driver=args.driver, input_topic=args.input,
                       output_topic=args.output, on_record=on_record, stateful="counted" if args.stateful else False)
    # The worker's garbage collections while it is fed (READY to the parent's close), seconds
    # each: full (generation 2) and young ones apart. Startup's and shutdown's are left out: the
    # collector is tuned only while a worker runs (gc_young_threshold, gc.freeze), and counting
    # them had reported full collections no measured record met.
    pauses, young_pauses = array("d"), array("d")
    lags = array("d")  # how late the event loop woke a 5 ms sleep, seconds, whenever over 5 ms
    started_gc: list[float] = []
    measuring = [False]

    def timed_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started_gc[:] = [time.perf_counter()]
        elif started_gc and measuring[0]:
            (pauses if info["generation"] == 2 else young_pauses).append(time.perf_counter() - started_gc[0])

    async def watch_loop() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            late = time.perf_counter() - before - 0.005
            if late > 0.005:
                lags.append(late)

    gc.callbacks.append(timed_gc)
    async with app.running():
        watcher = asyncio.create_task(watch_loop())
        deliver = app.runtime.router.deliver  # instrumented here, not in the runtime: a wall clock per batch

        async def noted(tp: Any, messages: Any) -> None:
            if messages and tp.topic == args.input:
                fetched_partitions.append(tp.partition)
                fetched_lasts.append(messages[-1].offset)
                fetched_at.append(now())
            await deliver(tp, messages)

        app.runtime.router.deliver = noted
        while {tp for tp in app.runtime.assigned if tp.topic == args.input} != {
                (args.input, p) for p in range(PARTITIONS)}:
            await asyncio.sleep(0.05)
        measuring[0] = True
        print("READY", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it
        measuring[0] = False
        watcher.cancel()
    if args.stages_file:
        Path(args.stages_file).write_bytes(orjson.dumps({
            "taken": list(zip(ids, appended, took, partitions, offsets, strict=False)),
            "fetched": list(zip(fetched_partitions, fetched_lasts, fetched_at, strict=False)),
            "gc_pauses": list(pauses), "young_gc_pauses": list(young_pauses), "loop_lags": list(lags)}))


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
    producing_s = time.perf_counter() - started
    producer.flush(30)
    print("RESULT " + json.dumps({"sent": sent, "seconds": time.perf_counter() - started, "producing_s": producing_s}),
          flush=True)


# -- the measuring parent --------------------------------------------------------------------------


def read_latencies(broker: str, topic: str, expected: Callable[[], int | None], until: float,
                   stamp_types: set[int] | None = None) -> list[tuple[float, float, int, int]]:
    """(produced-at, latency seconds, id, output append ms) of every output record, read as soon
    as it is there, until ``expected()`` (None while the generator still runs) records have come
    or ``until``."""
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "fetch.wait.max.ms": 5, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])  # no group join
    out: list[tuple[float, float, int, int]] = []
    loads = orjson.loads
    gc.disable()  # the reader makes no cycles; full collections over a growing list would be its pauses
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
                    value = loads(m.value())
                    ts = value["ts"]
                    stamp_type, stamp = m.timestamp()
                    out.append((ts, received - ts, value["id"], stamp))
                    if stamp_types is not None:
                        stamp_types.add(stamp_type)
    finally:
        gc.enable()
        consumer.close()
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds of a live process, from /proc/<pid>/stat (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def worker_command(peer: str | None, peers_python: Path | None, driver: str, stateful: bool,
                   base: list[str]) -> tuple[list[str], dict[str, str], Path | None]:
    """The worker's command line, environment and directory: streamkit's (this script as
    ``--role worker``) or the peer's (its script, by the peers' interpreter, from its directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    if peer is None:
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return base + ["--role", "worker", "--driver", driver] + (["--stateful"] if stateful else []), env, None
    if peer != "quix" or stateful or peers_python is None:
        raise ValueError(f"no peer worker for peer={peer!r}, stateful={stateful}, peers_python={peers_python}: "
                         "the peer is 'quix', stateless, run by the peers' interpreter")
    env.pop("PYTHONPATH", None)  # the peers venv, nothing of this repository
    return [str(peers_python), str(HERE / "peers" / "quix_latency.py"), *base[2:]], env, HERE / "peers"


def wait_ready(worker: subprocess.Popen[str], log: Path, deadline_s: float = 120.0) -> None:
    """Until the worker prints READY (it owns every input partition); its other lines are skipped."""
    deadline = time.monotonic() + deadline_s
    assert worker.stdout is not None
    while time.monotonic() < deadline:
        line = worker.stdout.readline()
        if line.strip() == "READY":
            return
        if not line:  # exited
            break
    raise RuntimeError(f"worker did not start: {log.read_text()[-2000:] if log.exists() else ''}")


def measure(broker: str, driver: str, rate: int, seconds: float, warmup: float = 3.0,
            timeout: float = 120.0, stateful: bool = False, peer: str | None = None,
            peers_python: Path | None = None) -> dict[str, Any]:
    """Run worker + generator on fresh topics; return the latency percentiles. ``stateful``: the
    agent also counts orders per user in a table (1,000 users; its changelog and checkpoint
    included) before sending the order on. ``peer="quix"``: Quix Streams is the worker (run by
    ``peers_python``); the stage breakdown is streamkit's only."""
    tag = uuid.uuid4().hex[:8]
    input_topic, output_topic, group = f"lat-in-{tag}", f"lat-out-{tag}", f"lat-{tag}"
    admin = admin_client(broker)
    for topic in (input_topic, output_topic):  # the broker's clock on every record: the stages
        create_topic(admin, topic, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    scratch = Path(tempfile.mkdtemp(prefix="latency-"))
    stages_file, worker_log = scratch / "taken.json", scratch / "worker.log"
    base = [sys.executable, str(Path(__file__).resolve()), "--broker", broker, "--input", input_topic]
    command, worker_env, cwd = worker_command(peer, peers_python, driver, stateful, base)
    if peer is None:
        command += ["--stages-file", str(stages_file)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with worker_log.open("w") as log:  # a file, not a pipe nobody reads while it runs
        worker = subprocess.Popen(command + ["--output", output_topic, "--group", group], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log, text=True, env=worker_env, cwd=cwd)
    try:
        wait_ready(worker, worker_log)  # READY once it owns every input partition
        generator = subprocess.Popen(base + ["--role", "generator", "--rate", str(rate), "--seconds", str(seconds)],
                                     stdout=subprocess.PIPE, text=True, env=env)
        wall0, reader0 = time.perf_counter(), time.process_time()
        worker0, children0 = process_cpu(worker.pid), children_cpu()
        sent: list[int] = []
        generated: dict[str, Any] = {}

        def expected() -> int | None:
            if not sent and generator.poll() is not None:
                out = generator.stdout.read() if generator.stdout else ""
                generated.update(json.loads(out.split("RESULT ", 1)[1]))
                sent.append(generated["sent"])
            return sent[0] if sent else None

        stamp_types: set[int] = set()
        latencies = read_latencies(broker, output_topic, expected, time.time() + seconds + timeout, stamp_types)
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
        changelog = f"{group}-counts-changelog"
        table_records = changelog_records(broker, changelog) if stateful else None
        delete_topics(admin, [input_topic, output_topic] + ([] if peer else [
            f"{group}-dlq", f"{group}-__leader", f"{group}-replies", f"{group}-__cluster"])
                      + ([changelog] if stateful else []))
    start = min(row[0] for row in latencies) + min(warmup, seconds / 4) if latencies else 0.0
    measured = [row for row in latencies if row[0] >= start]
    kept = sorted(row[1] * 1000 for row in measured)
    if not kept:
        shutil.rmtree(scratch, ignore_errors=True)
        return {"error": "no output records", "sent": sent[0], "received": len(latencies)}
    offered = generated["sent"] / generated["producing_s"]  # its flush at the end left out
    receipts = [row[0] + row[1] for row in latencies]  # first to last receipt: a steady latency cancels out,
    span = max(receipts) - min(receipts)  # a growing backlog (a framework behind its input) does not
    output_rps = len(latencies) / span if span > 0 else 0.0
    complete = len(latencies) >= sent[0]
    if peer is None:
        found = stages(measured, stages_file, stamp_types)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
        found = {"error": "not measured: the stage breakdown times streamkit's worker only"}
    return {"framework": peer or "streamkit", "driver": driver if peer is None else None, "group": group, "rate": rate,
            "seconds": seconds, "sent": sent[0], "received": len(latencies), "measured": len(kept),
            "offered_rps": offered, "output_rps": output_rps, "sustained": complete and output_rps >= 0.9 * offered,
            "p50_ms": percentile(kept, 0.50), "p90_ms": percentile(kept, 0.90),
            "p99_ms": percentile(kept, 0.99), "p999_ms": percentile(kept, 0.999), "max_ms": kept[-1],
            "complete": complete, "stateful": stateful, "changelog_records": table_records,
            "harness_cpu_cores": cores, "stages": found}


def changelog_records(broker: str, topic: str) -> int:
    """Records in the table's changelog (its partitions' high watermarks): what says the stateful
    run kept a table."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(client_conf(broker, **{"group.id": f"latency-check-{uuid.uuid4().hex[:8]}"}))
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS))
    finally:
        consumer.close()


STAGES = ("produce", "to_fetch", "queue_to_agent", "agent_to_append", "to_reader")


def stages(measured: list[tuple[float, float, int, int]], taken_file: Path,
           stamp_types: set[int]) -> dict[str, Any]:
    """Each record's latency split at the input append, the agent's take and the output append
    (module docstring): per stage p50/p99 in ms, and its mean among the records at or above the
    total's p99. Only where the broker stamps its append time (the dev broker keeps the
    producer's: the stages would be made up)."""
    import orjson
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    if stamp_types != {TIMESTAMP_LOG_APPEND_TIME}:
        shutil.rmtree(taken_file.parent, ignore_errors=True)
        return {"error": "not measured: this broker does not stamp records with its append time "
                         "(message.timestamp.type=LogAppendTime ignored)"}
    try:
        noted = orjson.loads(taken_file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        return {"error": f"the worker's take times are missing: {exc}"}
    finally:
        shutil.rmtree(taken_file.parent, ignore_errors=True)
    taken = {row[0]: row[1:] for row in noted["taken"]}
    fetches: dict[int, tuple[list[int], list[float]]] = {}  # partition -> (last offsets, times), in order
    for partition, last, at in noted["fetched"]:
        offsets, times = fetches.setdefault(partition, ([], []))
        offsets.append(last)
        times.append(at)
    rows = []
    for ts, latency, record_id, out_append_ms in measured:
        if record_id not in taken:
            continue
        in_append_ms, took, partition, offset = taken[record_id]
        offsets, times = fetches.get(partition, ([], []))
        i = bisect.bisect_left(offsets, offset)  # the first batch whose last offset reaches it
        if i == len(offsets):
            continue
        received, in_append, out_append = ts + latency, in_append_ms / 1000, out_append_ms / 1000
        rows.append((latency * 1000, (in_append - ts) * 1000, (times[i] - in_append) * 1000,
                     (took - times[i]) * 1000, (out_append - took) * 1000, (received - out_append) * 1000))
    if not rows:
        return {"error": "no output record matched a take time"}
    pauses, lags = sorted(noted["gc_pauses"]), sorted(noted["loop_lags"])
    young = sorted(noted["young_gc_pauses"])
    out: dict[str, Any] = {"records": len(rows), "worker_full_gcs": len(pauses),
                           "worker_full_gc_max_ms": pauses[-1] * 1000 if pauses else 0.0,
                           "worker_young_gcs": len(young), "worker_young_gc_max_ms": young[-1] * 1000 if young else 0.0,
                           "worker_young_gc_total_ms": sum(young) * 1000,
                           "worker_loop_lags_over_5ms": len(lags),
                           "worker_loop_lag_max_ms": lags[-1] * 1000 if lags else 0.0}
    for i, name in enumerate(STAGES, start=1):
        values = sorted(row[i] for row in rows)
        out[f"{name}_p50_ms"] = percentile(values, 0.50)
        out[f"{name}_p99_ms"] = percentile(values, 0.99)
    threshold = percentile(sorted(row[0] for row in rows), 0.99)
    tail = [row for row in rows if row[0] >= threshold]
    for i, name in enumerate(STAGES, start=1):
        out[f"tail_{name}_mean_ms"] = sum(row[i] for row in tail) / len(tail)
    return out


def describe_stages(found: dict[str, Any]) -> str:
    """One line: each stage's p50/p99 and its mean in the tail."""
    if "error" in found:
        return f"stages: {found['error']}"
    return "stages p50/p99 (tail mean) ms: " + ", ".join(
        f"{name} {found[f'{name}_p50_ms']:.1f}/{found[f'{name}_p99_ms']:.1f} ({found[f'tail_{name}_mean_ms']:.1f})"
        for name in STAGES) + (f"; worker: {found['worker_full_gcs']} full GCs "
                               f"(max {found['worker_full_gc_max_ms']:.1f} ms), {found['worker_young_gcs']} young "
                               f"(max {found['worker_young_gc_max_ms']:.1f} ms), "
                               f"{found['worker_loop_lags_over_5ms']} event-loop stalls over 5 ms (max "
                               f"{found['worker_loop_lag_max_ms']:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--driver", default="confluent", choices=["confluent", "aiokafka"])
    parser.add_argument("--rate", type=int, default=20000, help="input records per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--stateful", action="store_true",
                        help="the agent also counts orders per user in a table before sending each on")
    parser.add_argument("--peer", choices=["quix"],
                        help="Quix Streams as the worker (stateless), timed by the same generator and reader")
    parser.add_argument("--peers-python", type=Path,
                        help="the peers' interpreter for --peer (default: the harness's peers venv, created on first use)")
    parser.add_argument("--role", default="parent", choices=["parent", "worker", "generator"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--stages-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "worker":
        asyncio.run(worker_main(args))
    elif args.role == "generator":
        generator_main(args)
    else:
        if args.peer and args.stateful:
            parser.error("--peer runs the stateless enrichment only: drop --stateful")
        peers_python = args.peers_python
        if args.peer and peers_python is None:
            from run import ensure_peers_venv  # run.py imports this module: not at the top

            peers_python = ensure_peers_venv(log=lambda line: print(line, file=sys.stderr))
        print(json.dumps(measure(args.broker, args.driver, args.rate, args.seconds, stateful=args.stateful,
                                 peer=args.peer, peers_python=peers_python), indent=2))


if __name__ == "__main__":
    main()
