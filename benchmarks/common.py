"""Helpers shared by the benchmark scripts: process measurements, topics, scenario subprocesses."""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from peers.measure import peak_rss_mb  # noqa: F401 - one definition for both venvs (stdlib only)

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


def admin_client(broker: str) -> Any:
    """One AdminClient per run: a destroyed client fails its pending futures (_DESTROY)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_conf(broker))


def client_conf(broker: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings of the benchmarks' own clients: ``broker`` plus the STREAMKIT_* TLS and
    SASL settings, so they reach a secured broker as the apps under test do."""
    from streamkit.testing import confluent_conf

    return confluent_conf(broker, **extra)


def create_topic(client: Any, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """Create ``name`` and wait until every partition has a leader."""
    from confluent_kafka.admin import NewTopic

    futures = client.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                             config=config or {})])
    futures[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = client.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        ):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} not ready")


def delete_topics(client: Any, names: list[str]) -> None:
    if not names:
        return
    futures = client.delete_topics(names, operation_timeout=30)
    for name, future in futures.items():
        try:
            future.result(30)
        except Exception as exc:  # best effort cleanup
            print(f"  (could not delete {name}: {exc})", file=sys.stderr)


def topics_named(client: Any, part: str) -> list[str]:
    """The topics whose name holds ``part``: what a scenario's frameworks created for its group
    (streamkit's ``<group>-...``, Quix's ``changelog__<group>--...``)."""
    return sorted(t for t in client.list_topics(timeout=10).topics if part in t)


def produce_all(broker: str, topic: str, records: Iterable[tuple], what: str, **config: Any) -> float:
    """Produce ``(key, value)`` or ``(key, value, timestamp_ms)`` records as fast as librdkafka
    takes them (waiting while its queue is full), check every delivery, and return the seconds
    it took."""
    from confluent_kafka import Producer

    producer = Producer(client_conf(broker, partitioner="murmur2_random", **config))
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    started = time.perf_counter()
    produce = producer.produce
    for i, record in enumerate(records):
        key, value, timestamp = record if len(record) == 3 else (*record, 0)  # 0: now
        while True:
            try:
                produce(topic, value, key, on_delivery=on_delivery, timestamp=timestamp)
                break
            except BufferError:  # local queue full: serve delivery reports and retry
                producer.poll(0.05)
        if i % 20000 == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    if remaining or errors:
        raise RuntimeError(f"{remaining} {what} not delivered; errors: {errors}")
    return time.perf_counter() - started


def cpu_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of the machine so far, from /proc/stat ((0, 0) where there is none)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_pct(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The share of the machine's CPU time the hypervisor gave to others between two readings:
    on a shared VM it explains a run slower than its neighbours (the ratios of one run hold,
    single rates do not)."""
    total = after[1] - before[1]
    return None if total <= 0 else 100.0 * (after[0] - before[0]) / total


STOLEN_RETRIES = 2


def stolen(result: dict[str, Any], max_steal: float | None) -> bool:
    """Whether a run lost more of the machine than ``--max-steal`` allows (never, unset)."""
    steal = result.get("steal_pct")
    return max_steal is not None and steal is not None and "error" not in result and steal > max_steal


def with_steal(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``'s result with the machine's steal over it (for measures that launch their
    own processes: latency's generator and reader, scale-out's workers)."""
    ticks = cpu_ticks()
    result = measure()
    result["steal_pct"] = steal_pct(ticks, cpu_ticks())
    return result


def unstolen(measure: Callable[[int], dict[str, Any]], max_steal: float | None,
             label: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``measure(attempt)`` again (up to ``STOLEN_RETRIES`` times) while its run lost more of the
    machine than ``max_steal``: the run to count, and the stolen ones (kept apart, reported)."""
    stolen_runs: list[dict[str, Any]] = []
    result = measure(0)
    for again in range(1, STOLEN_RETRIES + 1):
        if not stolen(result, max_steal):
            break
        print(f"  {label}: {result['steal_pct']:.0f}% of the machine's CPU was stolen "
              f"(--max-steal {max_steal:g}): run again", flush=True)
        stolen_runs.append(result)
        result = measure(again)
    return result, stolen_runs


def run_scenario_process(script: str, scenario: str, args: list[str], timeout: float,
                         env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``script --scenario NAME args`` in a fresh interpreter; parse its ``RESULT {json}`` line.

    Returns the result (or an ``error`` entry) with ``process_s`` and any warning lines. The
    caller's ``STREAMKIT_*`` variables are left out; ``env_extra`` sets the scenario's own.
    """
    cmd = [sys.executable, script, "--scenario", scenario, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")} | (env_extra or {})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    started, ticks = time.perf_counter(), cpu_ticks()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, env=env)
    except subprocess.TimeoutExpired as exc:
        return {"scenario": scenario, "error": "timeout", "stderr": str(exc.stderr)[-4000:], "stdout": "",
                "process_s": time.perf_counter() - started}
    result: dict[str, Any] | None = None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    if proc.returncode != 0 or result is None:
        result = {"scenario": scenario, "error": f"exit {proc.returncode}", "stderr": proc.stderr[-4000:],
                  "stdout": proc.stdout[-2000:]}
    result["process_s"] = time.perf_counter() - started
    result["steal_pct"] = steal_pct(ticks, cpu_ticks())
    warnings = [ln for ln in proc.stderr.splitlines() if "WARNING" in ln or "ERROR" in ln or "Traceback" in ln]
    if warnings:
        result["stderr_warnings"] = warnings[:20]
    return result


def run_peer_process(python: Path, script: Path, scenario: str, args: list[str], timeout: float) -> dict[str, Any]:
    """Run a peer's script with the peers' interpreter, from its directory; parse its
    ``RESULT {json}`` line (faust sends print() to its log: stderr is searched too)."""
    started, ticks = time.perf_counter(), cpu_ticks()
    try:
        proc = subprocess.run([str(python), str(script), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=str(script.parent))
    except subprocess.TimeoutExpired as exc:
        return {"scenario": scenario, "error": "timeout", "stderr": str(exc.stderr)[-3000:]}
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        if "RESULT {" in line:
            result = json.loads(line[line.index("RESULT {") + len("RESULT "):])
            result["scenario"] = scenario
            result["process_s"] = time.perf_counter() - started
            result["steal_pct"] = steal_pct(ticks, cpu_ticks())
            return result
    return {"scenario": scenario, "error": f"exit {proc.returncode}", "stderr": proc.stderr[-3000:]}


async def final_checkpoint(app: Any, attempts: int = 10) -> None:
    """The end of a streamkit scenario's timed window: flush and offsets (or the transaction's
    commit), committed again if a failed delivery rolled it back (the records come again)."""
    import asyncio

    for attempt in range(attempts):
        try:
            await app.runtime.checkpoint.commit()
            return
        except Exception as exc:
            if attempt == attempts - 1:
                raise
            print(f"checkpoint rolled back, committing again: {exc}", file=sys.stderr)
            await asyncio.sleep(0.5)  # let the rewound records be reprocessed


def rate_summary(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The successful runs and the records/s statistics every benchmark reports."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return ok, {"ok_runs": 0, "errors": [r.get("error") for r in runs]}
    rates = [r["records_per_s"] for r in ok]
    return ok, {
        "ok_runs": len(ok),
        "median_rps": statistics.median(rates),
        "min_rps": min(rates),
        "max_rps": max(rates),
        "median_elapsed_s": statistics.median(r["elapsed_s"] for r in ok),
        "median_cpu_s": statistics.median(r["cpu_s"] for r in ok),
        "max_peak_rss_mb": max(r["peak_rss_mb"] for r in ok),
        "max_steal_pct": max((r["steal_pct"] for r in ok if r.get("steal_pct") is not None), default=None),
    }
