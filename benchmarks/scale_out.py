"""Scale-out: the pipeline in 1 worker process vs 2, on the same pre-filled topic.

    python benchmarks/scale_out.py --broker 127.0.0.1:19092 --driver confluent --records 1000000
    python benchmarks/scale_out.py --broker 127.0.0.1:19092 --kind stateful --modes two_one_command

Each run starts 1, then 2 processes in one fresh consumer group over the same input topic, then
the same 2 as ONE command, ``streamkit worker -A scale_out_app:app --processes 2`` (its
supervisor starts both members). A worker takes its first record only once it owns its share of
the partitions (so one that joined first does not race ahead alone). Every worker records which
input partitions it owns whenever that changes and, every 50 ms, how many records it has
processed. The rate counts only the window in which the group is stable and every worker is
still busy: from the last assignment change of any worker to the moment the first worker runs
out of records (after that its partner works alone, which says nothing about scaling). So group
joins and the tail are excluded alike for 1 and 2 workers, and the ratio compares steady states.

A run fails, naming the split, when in its window the 4 partitions were not shared evenly (a
2-worker run must be 2 + 2: a 1 + 3 split caps the ratio at 4/3), and when its output is wrong:
``--kind stateless`` (the default) must hold every input's sequence number (``id``) at least
once; ``--kind stateful`` (count per user in a table with its changelog) must end each user's
counts at the input's count for that user; ``--kind windowed`` (60 s tumbling finals) must emit
each closed window's count equal to the input's, once (``peer_outputs.py``, the checks the
peers' outputs get). ``--modes`` picks which of 1, 2, and 2 from one command run (the harness's
all-cores comparisons with Bytewax and Pathway take only the last).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from common import ROOT, admin_client, client_conf, create_topic, delete_topics, topics_named
from peer_outputs import check_counts, check_windows, expected_windows, read_topic

PARTITIONS = 4
IDLE_EXIT_S = 2.0  # a worker that processed records and then saw none for this long is done
HERE = Path(__file__).resolve().parent
ONE_COMMAND_APP = "scale_out_app:app"  # benchmarks/scale_out_app.py
MEMBER_RESULT = re.compile(r"^\[(w\d+)\] RESULT (.*)$")  # the supervisor prefixes each member's lines
# pipeline.build_app's ``stateful`` for each kind: the main table's stateless, stateful and windowed scenarios
KINDS: dict[str, bool | str] = {"stateless": False, "stateful": True, "windowed": "windowed"}


HOLD = "scale-out: until this worker owns its share"


def share_assigned(app: Any, input_topic: str, workers: int, group: str) -> Any:
    """``before_start`` of the pipeline: start once this worker owns its share and every other
    worker of the run owns its own (a file each under ``/tmp/<group>-ready``: under
    cooperative-sticky the partner gets its partitions a rebalance after this one gave them up),
    so no worker races ahead alone (bounded: start anyway after 60 s). Until then its input
    partitions stay paused at the consumer: an agent waiting here with a full inbox would block
    the consume loop, which then cannot answer the partner's rebalance (the worker holding all 4
    gave 2 away only when this wait timed out)."""
    share = PARTITIONS // workers
    ready = Path(f"/tmp/{group}-ready")
    waiting = {"on": True}

    @app.on_partitions_assigned.connect
    async def hold(_app: Any, assigned: set[Any], **_kwargs: Any) -> None:
        if waiting["on"]:
            app.runtime.pauses.hold(HOLD, [tp for tp in assigned if tp.topic == input_topic])

    async def wait() -> None:
        try:
            for _ in range(1200):
                if sum(1 for tp in app.runtime.assigned if tp.topic == input_topic) == share:
                    ready.mkdir(exist_ok=True)
                    (ready / f"{os.getpid()}").touch()
                    if len(list(ready.iterdir())) >= workers:
                        return
                await asyncio.sleep(0.05)
        finally:
            waiting["on"] = False
            app.runtime.pauses.release_all(HOLD)
    return wait


async def sample_until_idle(app: Any, input_topic: str, processed: dict[str, Any]) -> dict[str, Any]:
    """Every 50 ms: the records processed so far (``processed["n"]``, counted by the pipeline's
    ``on_record``) and, when it changed, the input partitions this worker owns; until the worker
    processed records and then saw none for ``IDLE_EXIT_S``."""
    samples: list[tuple[float, int]] = []
    assignment: frozenset = frozenset()
    changes: list[tuple[float, list[int]]] = [(time.time(), [])]  # (when, the input partitions owned)
    last = 0.0
    while True:
        await asyncio.sleep(0.05)
        now = time.time()
        mine = frozenset(tp for tp in app.runtime.assigned if tp.topic == input_topic)
        if mine != assignment:
            assignment = mine
            changes.append((now, sorted(tp.partition for tp in mine)))
        if not samples or samples[-1][1] != processed["n"]:
            last = now
        samples.append((now, processed["n"]))
        if processed["n"] and now - last > IDLE_EXIT_S:
            late = sum(getattr(table, "late_records", 0) for table in app.tables.values())  # windowed: dropped
            return {"assignments": changes, "last_record_at": last, "processed": processed["n"], "samples": samples,
                    "late_records": late}


async def worker_main(args: argparse.Namespace) -> None:
    from pipeline import build_app

    processed = {"n": 0}

    def on_record(_order: Any) -> None:
        processed["n"] += 1

    waits: list[Any] = []

    async def before_start() -> None:
        await waits[0]()

    app, _ = build_app(group=args.group, broker=args.broker, driver=args.driver, input_topic=args.input,
                       output_topic=args.output, on_record=on_record, before_start=before_start,
                       stateful=KINDS[args.kind])
    waits.append(share_assigned(app, args.input, args.workers, args.group))
    async with app.running():
        result = await sample_until_idle(app, args.input, processed)
    print("RESULT " + json.dumps(result), flush=True)


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


def describe_split(split: list[list[int]]) -> str:
    """``2 + 2 ([0, 1], [2, 3])``: each worker's count of input partitions, then which."""
    return " + ".join(str(len(p)) for p in split) + " (" + ", ".join(str(p) for p in split) + ")"


def split_problem(split: list[list[int]], partitions: int = PARTITIONS) -> str | None:
    """Why a run's split of the input partitions in its window is not the even one (each of the
    ``len(split)`` workers owns ``partitions / workers``, and together all of them), or None."""
    share, extra = divmod(partitions, len(split))
    owned = sorted(p for mine in split for p in mine)
    if extra == 0 and all(len(mine) == share for mine in split) and owned == list(range(partitions)):
        return None
    even = " + ".join([str(share)] * len(split)) if extra == 0 else "an even share"
    return f"partition split {describe_split(split)} in the measured window, not {even} of {partitions}"


def stable_window(results: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    """The group's records/s in its stable window (see the module docstring), with each worker's
    input partitions in it; ``error`` when the window is too short or the split not even."""
    # The window ends when the first worker runs dry (its partner's later rebalance, when it
    # leaves, is after the window); it starts at the last assignment change before that.
    end = min(r["last_record_at"] for r in results)
    last_change = [max((c for c in r["assignments"] if c[0] <= end), key=lambda c: c[0]) for r in results]
    start = max(t for t, _ in last_change)
    split = [sorted(p) for _, p in last_change]
    base = {"workers": workers, "partitions": [len(p) for p in split], "split": split,
            "processed": [r["processed"] for r in results], "late_records": sum(r.get("late_records", 0) for r in results)}
    problem = split_problem(split)
    if problem is not None:
        return {**base, "error": problem}
    if end - start < 0.5:
        return {**base, "error": f"stable window too short ({end - start:.2f}s)"}
    records = sum(processed_at(r["samples"], end) - processed_at(r["samples"], start) for r in results)
    return {**base, "records_per_s": records / (end - start), "window_s": end - start, "window_records": records}


def read_ids(broker: str, topic: str, timeout: float = 300.0) -> tuple[int, set[int]]:
    """Every record of ``topic`` (to its high watermarks when called): how many, and the distinct
    ``id`` fields of their JSON values (the pipeline carries the input's sequence number)."""
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(client_conf(broker, **{"group.id": f"scale-read-{uuid.uuid4().hex[:8]}",
                                               "enable.auto.commit": False, "enable.partition.eof": True}))
    try:
        high = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        open_partitions = {p for p, h in high.items() if h > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in open_partitions])
        count, ids = 0, set()
        deadline = time.monotonic() + timeout
        while open_partitions and time.monotonic() < deadline:
            for m in consumer.consume(10000, 1.0):
                if m.error() is not None:
                    continue  # partition EOF: the offset check below closes it
                count += 1
                ids.add(orjson.loads(m.value())["id"])
                if m.offset() + 1 >= high[m.partition()]:
                    open_partitions.discard(m.partition())
        if open_partitions:
            raise RuntimeError(f"{topic}: partitions {sorted(open_partitions)} not read to their end in {timeout:g}s")
        return count, ids
    finally:
        consumer.close()


def input_count(broker: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(client_conf(broker, **{"group.id": f"scale-count-{uuid.uuid4().hex[:8]}"}))
    try:
        return sum(hi - lo for lo, hi in (consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                                          for p in range(PARTITIONS)))
    finally:
        consumer.close()


def check_outputs(broker: str, kind: str, input_topic: str, output: str, expected: int) -> dict[str, Any]:
    """What the output holds and, under ``error``, why it is wrong for ``kind`` (see the module
    docstring); the stateful and windowed checks are those the peers' outputs get."""
    if kind == "stateless":
        count, ids = read_ids(broker, output)
        found: dict[str, Any] = {"outputs": count, "distinct_ids": len(ids)}
        problem = outputs_problem(expected, count, ids)
    else:
        rows = read_topic(broker, output, timeout_s=300)
        if kind == "stateful":
            found = check_counts(rows, expected)
        else:
            found = check_windows(rows, expected_windows(read_topic(broker, input_topic, timeout_s=300)))
        problem = None if found["output_ok"] else found["check"]
    return found if problem is None else {**found, "error": problem}


def outputs_problem(expected: int, count: int, ids: set[int]) -> str | None:
    """At least once: every input's sequence number ``0..expected-1`` in the output, none other."""
    if count >= expected and ids == set(range(expected)):
        return None
    return (f"output holds {count} records with {len(ids)} distinct ids of the {expected} inputs "
            f"(at least once needs >= {expected} records and every id once or more)")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    return env


def _run_separately(broker: str, driver: str, input_topic: str, output: str, group: str, workers: int,
                    timeout: float, kind: str) -> list[dict[str, Any]] | dict[str, Any]:
    """``workers`` processes started one by one; each prints its RESULT when it ran dry."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--role", "worker", "--broker", broker, "--driver", driver,
           "--input", input_topic, "--output", output, "--group", group, "--workers", str(workers), "--kind", kind]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(workers)]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
            if proc.returncode != 0 or line is None:
                return {"error": f"exit {proc.returncode}", "stderr": err[-2000:]}
            results.append(json.loads(line[len("RESULT "):]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def _run_one_command(broker: str, driver: str, input_topic: str, output: str, group: str, workers: int,
                     timeout: float, kind: str) -> list[dict[str, Any]] | dict[str, Any]:
    """``streamkit worker -A scale_out_app:app --processes N``: each member prints its RESULT
    (prefixed ``[w<i>]`` by the supervisor) when it ran dry and keeps running; once all have,
    the supervisor is stopped with SIGTERM, as an operator would, and must exit 0."""
    env = _env()
    env.update(SCALE_OUT_BROKER=broker, SCALE_OUT_DRIVER=driver, SCALE_OUT_INPUT=input_topic,
               SCALE_OUT_OUTPUT=output, SCALE_OUT_GROUP=group, SCALE_OUT_WORKERS=str(workers), SCALE_OUT_KIND=kind)
    cmd = [sys.executable, "-m", "streamkit", "worker", "-A", ONE_COMMAND_APP, "--processes", str(workers),
           "-l", "warning", "--without-web", "--data-dir", f"/tmp/{group}"]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=HERE)
        lines: queue.Queue[str | None] = queue.Queue()

        def copy() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=copy, daemon=True).start()
        results: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        try:
            while len(results) < workers and time.monotonic() < deadline:
                try:
                    line = lines.get(timeout=1.0)
                except queue.Empty:
                    continue
                if line is None:
                    break
                found = MEMBER_RESULT.match(line.rstrip("\n"))
                if found:
                    results[found.group(1)] = json.loads(found.group(2))
            if len(results) < workers:
                why = "exited" if proc.poll() is not None else f"timed out after {timeout:g}s"
                err.seek(0)
                return {"error": f"supervisor {why} with {len(results)} of {workers} member results "
                                 f"(exit {proc.returncode})", "stderr": err.read()[-2000:]}
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
            if code != 0:
                err.seek(0)
                return {"error": f"supervisor exited {code} after SIGTERM", "stderr": err.read()[-2000:]}
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [results[name] for name in sorted(results)]


def measure(broker: str, driver: str, input_topic: str, workers: int, timeout: float = 600.0,
            one_command: bool = False, kind: str = "stateless") -> dict[str, Any]:
    """One run of ``workers`` processes (``one_command``: under one ``streamkit worker
    --processes`` supervisor) of the ``kind`` pipeline; the group's records/s in its stable
    window, its partition split, and whether the output is right for ``kind``."""
    tag = uuid.uuid4().hex[:8]
    output, group = f"scale-out-{tag}", f"scale-{tag}"
    admin = admin_client(broker)
    create_topic(admin, output, PARTITIONS)
    run = _run_one_command if one_command else _run_separately
    try:
        results = run(broker, driver, input_topic, output, group, workers, timeout, kind)
        if isinstance(results, dict):
            return {"workers": workers, "one_command": one_command, "kind": kind, **results}
        found = {"one_command": one_command, "kind": kind, **stable_window(results, workers)}
        expected = input_count(broker, input_topic)
        checked = check_outputs(broker, kind, input_topic, output, expected)
        problem = checked.pop("error", None)
        found.update(expected=expected, **checked)
        if problem is not None:
            found["error"] = found["error"] + "; " + problem if "error" in found else problem
        return found
    finally:
        shutil.rmtree(f"/tmp/{group}-ready", ignore_errors=True)
        delete_topics(admin, [output, *topics_named(admin, group)])


def describe(result: dict[str, Any]) -> str:
    """One line for a run: its rate and split, or why it failed (naming the split)."""
    late = f", {result['late_records']:,} late records dropped" if result.get("late_records") else ""
    if "error" in result:
        return f"FAILED {result['error']}{late}"
    output = (f"{result['outputs']:,} outputs, {result['distinct_ids']:,} distinct ids" if "outputs" in result
              else result["check"])
    return (f"{result['records_per_s']:,.0f} rec/s over {result['window_s']:.1f}s, "
            f"split {describe_split(result['split'])}, {output}{late}")


MODES = (("one", 1, False), ("two", 2, False), ("two_one_command", 2, True))
"""(key, processes, under one command): 1 process, 2 started separately, 2 from one command."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True)
    parser.add_argument("--driver", default="confluent", choices=["confluent", "aiokafka"])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--kind", default="stateless", choices=list(KINDS),
                        help="the pipeline: the stateless map, the count per user, or 60 s tumbling finals")
    parser.add_argument("--modes", default=",".join(key for key, _, _ in MODES),
                        help="which runs, of " + ", ".join(key for key, _, _ in MODES) + " (comma-separated)")
    parser.add_argument("--role", default="parent", choices=["parent", "worker"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "worker":
        asyncio.run(worker_main(args))
        return
    modes = [mode for mode in MODES if mode[0] in args.modes.split(",")]
    if not modes:
        parser.error(f"--modes {args.modes!r}: none of " + ", ".join(key for key, _, _ in MODES))
    from quick_stateless import fill_input

    input_topic = f"scale-in-{uuid.uuid4().hex[:8]}"
    admin = admin_client(args.broker)
    create_topic(admin, input_topic, PARTITIONS)
    found: dict[str, Any] = {}
    try:
        fill_input(args.broker, input_topic, args.records)
        for key, workers, one_command in modes:
            found[key] = measure(args.broker, args.driver, input_topic, workers, one_command=one_command,
                                 kind=args.kind)
            print(f"{workers} process(es){' (one command)' if one_command else ''}: {describe(found[key])}",
                  file=sys.stderr, flush=True)
    finally:
        delete_topics(admin, [input_topic])
    one = found.get("one", {}).get("records_per_s")
    for key, ratio in (("two", "ratio"), ("two_one_command", "ratio_two_one_command")):  # to 1 process, same input
        if key in found and "one" in found:
            found[ratio] = (found[key].get("records_per_s") or 0) / one if one else None
    print(json.dumps(found, indent=2))
    failed = [k for k, _, _ in modes if "error" in found[k]]
    if failed:
        print("FAILED: " + "; ".join(f"{k}: {found[k]['error']}" for k in failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
