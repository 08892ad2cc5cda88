"""The scenarios of ``python -m benchmarks run`` that are not one process over the input topic:
latency at half load, scale-out (2 workers vs 1), state size (state_size.py), and table recovery (streamkit and the peers).
Each returns a summary for the run's table and JSON."""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import latency
import scale_out
from common import unstolen, with_steal

HERE = Path(__file__).resolve().parent
EXTRAS = ["latency-confluent", "latency-aiokafka", "scale-out-confluent", "scale-out-aiokafka",
          "state-size-confluent", "state-size-aiokafka", "recovery", "peer-recovery"]


def run_latency(args: argparse.Namespace, driver: str, stateless_rps: float | None) -> dict[str, Any]:
    """p50/p99 at half the stateless throughput measured in this run (median over repeats)."""
    if not stateless_rps:
        return {"error": f"no streamkit-{driver} throughput to take half of"}
    rate = int(stateless_rps / 2)
    runs, stolen_runs = [], []
    for rep in range(args.repeat):
        result, stolen_now = unstolen(lambda _again: with_steal(
            lambda: latency.measure(args.broker, driver, rate, args.latency_seconds)),
            args.max_steal, f"latency-{driver} #{rep + 1}")
        runs.append(result)
        stolen_runs += stolen_now
        print(f"  latency-{driver} #{rep + 1} at {rate:,} rec/s: "
              + (f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, max {result['max_ms']:.1f} ms, "
                 f"harness {result['harness_cpu_cores']:.2f} cores; " + latency.describe_stages(result["stages"])
                 if "error" not in result else f"FAILED {result['error']}") + _steal(result), flush=True)
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"rate": rate, "ok_runs": 0, "runs": runs, "stolen_runs": stolen_runs}
    staged = [r["stages"] for r in ok if "error" not in r["stages"]]
    return {"rate": rate, "ok_runs": len(ok), "runs": runs, "stolen_runs": stolen_runs,
            **{f"median_{q}": statistics.median(r[q] for r in ok) for q in ("p50_ms", "p99_ms", "p999_ms", "max_ms")},
            "median_stages": {q: statistics.median(s[q] for s in staged) for q in staged[0]} if staged else None,
            "max_steal_pct": _max_steal(ok), "all_complete": all(r["complete"] for r in ok)}


def run_scale_out(args: argparse.Namespace, driver: str, input_topic: str) -> dict[str, Any]:
    """Records/s of 1 and of 2 worker processes in the group's stable window (medians)."""
    rates: dict[int, list[float]] = {1: [], 2: []}
    runs, stolen_runs = [], []
    for rep in range(args.repeat):
        for workers in (1, 2):
            result, stolen_now = unstolen(lambda _again: with_steal(
                lambda: scale_out.measure(args.broker, driver, input_topic, workers, timeout=args.timeout)),  # noqa: B023 - called within this same iteration
                args.max_steal, f"scale-out-{driver} x{workers} #{rep + 1}")
            runs.append(result)
            stolen_runs += stolen_now
            if "error" in result:
                print(f"  scale-out-{driver} x{workers} #{rep + 1}: FAILED {result['error']}", flush=True)
                continue
            rates[workers].append(result["records_per_s"])
            print(f"  scale-out-{driver} x{workers} #{rep + 1}: {result['records_per_s']:,.0f} rec/s "
                  f"over {result['window_s']:.1f}s{_steal(result)}", flush=True)
    if not rates[1] or not rates[2]:
        return {"ok_runs": 0, "runs": runs, "stolen_runs": stolen_runs}
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    return {"ok_runs": min(len(rates[1]), len(rates[2])), "one_worker_rps": one, "two_workers_rps": two,
            "ratio": two / one, "max_steal_pct": _max_steal([r for r in runs if "error" not in r]),
            "runs": runs, "stolen_runs": stolen_runs}


def _steal(result: dict[str, Any]) -> str:
    steal = result.get("steal_pct")
    return "" if steal is None else f" ({steal:.0f}% stolen)"


def _max_steal(runs: list[dict[str, Any]]) -> float | None:
    return max((r["steal_pct"] for r in runs if r.get("steal_pct") is not None), default=None)


def run_json_script(cmd: list[str], path: Path, timeout: float, what: str) -> dict[str, Any]:
    print(f"{what} ...", flush=True)
    proc = subprocess.run(cmd + ["--json", str(path)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        return {"error": f"exit {proc.returncode}"}
    return json.loads(path.read_text())


def run_recovery(args: argparse.Namespace) -> dict[str, Any]:
    """streamkit: a ``--recovery-keys`` changelog replayed into empty RocksDB stores."""
    cmd = [sys.executable, str(HERE / "recovery.py"), "--broker", args.broker, "--keys", str(args.recovery_keys),
           "--repeat", str(args.repeat), "--scenarios", "raw-confluent,aiokafka-rocksdb,confluent-rocksdb"]
    return run_json_script(cmd, Path(args.json).with_name("recovery.json"), args.timeout * 6,
                           f"recovery: {args.recovery_keys} changelog records into empty RocksDB stores")


def run_peer_recovery(args: argparse.Namespace) -> dict[str, Any]:
    """Quix Streams and faust-streaming restoring their own changelogs into empty stores."""
    faust_keys = min(args.recovery_keys, args.peer_recovery_faust_keys)
    cmd = [sys.executable, str(HERE / "peer_recovery.py"), "--broker", args.broker, "--keys", str(args.recovery_keys),
           "--faust-keys", str(faust_keys), "--repeat", str(args.repeat), "--timeout", str(args.timeout)]
    return run_json_script(cmd, Path(args.json).with_name("peer_recovery.json"), args.timeout * 12,
                           f"peer recovery: quix {args.recovery_keys} keys, faust {faust_keys} keys")
