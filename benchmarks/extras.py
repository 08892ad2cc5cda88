"""The scenarios of ``python -m benchmarks run`` that are not one process over the input topic:
latency at a third and at half of the stateless throughput (streamkit, and Quix Streams at the
same rates), scale-out (2 workers vs 1, and 2 from one command), the stateful and windowed
pipelines on all cores from one command (against Bytewax's and Pathway's all-cores runs), state
size (state_size.py), and table recovery (streamkit and the peers).
Each returns a summary for the run's table and JSON."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import latency
import scale_out
from common import unstolen, with_steal

HERE = Path(__file__).resolve().parent
ALL_CORES_KINDS = ("stateful", "windowed")  # the stateless one's all-cores figure is scale-out's
EXTRAS = ["latency-confluent", "latency-aiokafka", "scale-out-confluent", "scale-out-aiokafka",
          *(f"all-cores-{driver}-{kind}" for driver in ("confluent", "aiokafka") for kind in ALL_CORES_KINDS),
          "state-size-confluent", "state-size-aiokafka", "recovery", "peer-recovery"]


LATENCY_LOADS = (("third", 3), ("half", 2))  # of the stateless throughput this run measured


def run_latency(args: argparse.Namespace, driver: str, stateless_rps: float | None,
                peers_python: Path | None = None) -> dict[str, Any]:
    """p50/p99 at a third and at half of the stateless throughput measured in this run (median
    over repeats), and Quix Streams' at the same rates, each Quix run right after streamkit's
    (``peers_python``: none with ``--no-peers``). The top level is the half-load figures, as
    before; ``third`` the third's; ``quix`` Quix's per load; ``vs_quix`` the p99 ratios."""
    if not stateless_rps:
        return {"error": f"no streamkit-{driver} throughput to take a third and half of"}
    rates = {load: int(stateless_rps / divisor) for load, divisor in LATENCY_LOADS}
    frameworks = ("streamkit", "quix") if peers_python else ("streamkit",)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(f, load): [] for f in frameworks for load in rates}
    stolen: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in runs}
    for rep in range(args.repeat):
        for load, rate in rates.items():
            for framework in frameworks:
                peer = None if framework == "streamkit" else framework
                label = f"latency-{driver}" if peer is None else f"latency-quix (beside {driver})"
                result, stolen_now = unstolen(lambda _again: with_steal(  # noqa: B023 - called within this iteration
                    lambda: latency.measure(args.broker, driver, rate, args.latency_seconds, peer=peer,  # noqa: B023
                                            peers_python=peers_python)),
                    args.max_steal, f"{label} {load} #{rep + 1}")
                runs[(framework, load)].append(result)
                stolen[(framework, load)] += stolen_now
                print(f"  {label} #{rep + 1} at {rate:,} rec/s ({load}): " + _describe_latency(result), flush=True)
    out = {**_latency_summary(rates["half"], runs[("streamkit", "half")], stolen[("streamkit", "half")]),
           "third": _latency_summary(rates["third"], runs[("streamkit", "third")], stolen[("streamkit", "third")])}
    if not peers_python:
        out["quix"] = {"skipped": "--no-peers: Quix Streams' latency not measured"}
        return out
    out["quix"] = {load: _latency_summary(rate, runs[("quix", load)], stolen[("quix", load)])
                   for load, rate in rates.items()}
    out["vs_quix"] = {}
    for load in rates:
        ours, theirs = (out if load == "half" else out[load]), out["quix"][load]
        if ours.get("ok_runs") and theirs.get("ok_runs"):
            out["vs_quix"][load] = ours["median_p99_ms"] / theirs["median_p99_ms"]
            print(f"  latency {driver} / quix at {rates[load]:,} rec/s ({load}): p50 {ours['median_p50_ms']:.1f} / "
                  f"{theirs['median_p50_ms']:.1f} ms, p99 {ours['median_p99_ms']:.1f} / {theirs['median_p99_ms']:.1f} "
                  f"ms, p99 ratio {out['vs_quix'][load]:.2f}" + _unsustained(ours, "streamkit")
                  + _unsustained(theirs, "quix"), flush=True)
    return out


def _describe_latency(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"FAILED {result['error']}" + _steal(result)
    line = (f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, max {result['max_ms']:.1f} ms, "
            f"out {result['output_rps']:,.0f} of {result['offered_rps']:,.0f} rec/s offered"
            f"{'' if result['sustained'] else ' NOT SUSTAINED'}, harness {result['harness_cpu_cores']:.2f} cores")
    if result["framework"] == "streamkit":
        line += "; " + latency.describe_stages(result["stages"])
    return line + _steal(result)


def _unsustained(summary: dict[str, Any], who: str) -> str:
    """Said aloud: a framework that did not keep up, with the rate it reached."""
    if summary.get("all_sustained", True):
        return ""
    return f" ({who} NOT SUSTAINED: {summary['median_output_rps']:,.0f} rec/s out of {summary['rate']:,} offered)"


def _latency_summary(rate: int, runs: list[dict[str, Any]], stolen_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over one framework's runs at one rate."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"rate": rate, "ok_runs": 0, "runs": runs, "stolen_runs": stolen_runs}
    staged = [r["stages"] for r in ok if "error" not in r["stages"]]
    return {"rate": rate, "ok_runs": len(ok), "runs": runs, "stolen_runs": stolen_runs,
            **{f"median_{q}": statistics.median(r[q] for r in ok)
               for q in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "output_rps", "offered_rps")},
            "median_stages": {q: statistics.median(s[q] for s in staged) for q in staged[0]} if staged else None,
            "max_steal_pct": _max_steal(ok), "all_complete": all(r["complete"] for r in ok),
            "all_sustained": all(r["sustained"] for r in ok)}


def run_scale_out(args: argparse.Namespace, driver: str, input_topic: str) -> dict[str, Any]:
    """Records/s of 1 worker process, of 2 started separately and of 2 started by one command
    (``streamkit worker --processes 2``), each in the group's stable window (medians); every
    run's partition split is printed, and a run not split evenly fails the scenario."""
    rates: dict[str, list[float]] = {key: [] for key, _, _ in scale_out.MODES}
    runs, stolen_runs, uneven = [], [], []
    for rep in range(args.repeat):
        for key, workers, one_command in scale_out.MODES:
            label = f"scale-out-{driver} x{workers}{' (one command)' if one_command else ''} #{rep + 1}"
            result, stolen_now = unstolen(lambda _again: with_steal(
                lambda: scale_out.measure(args.broker, driver, input_topic, workers, timeout=args.timeout,  # noqa: B023 - called within this same iteration
                                          one_command=one_command)),  # noqa: B023
                args.max_steal, label)
            runs.append(result)
            stolen_runs += stolen_now
            print(f"  {label}: {scale_out.describe(result)}{_steal(result)}", flush=True)
            if "error" in result:
                if "partition split" in result["error"]:
                    uneven.append(f"{label}: {result['error']}")
                continue
            rates[key].append(result["records_per_s"])
    if not rates["one"] or not rates["two"]:
        return {"ok_runs": 0, "runs": runs, "stolen_runs": stolen_runs}
    one, two = statistics.median(rates["one"]), statistics.median(rates["two"])
    out = {"ok_runs": min(len(rates["one"]), len(rates["two"])), "one_worker_rps": one, "two_workers_rps": two,
           "ratio": two / one, "max_steal_pct": _max_steal([r for r in runs if "error" not in r]),
           "runs": runs, "stolen_runs": stolen_runs}
    if rates["two_one_command"]:
        out["two_processes_one_command_rps"] = statistics.median(rates["two_one_command"])
        out["ratio_one_command"] = out["two_processes_one_command_rps"] / one
    if uneven:  # loud: the table's ratio would otherwise hide a 1 + 3 split
        out["error"] = "; ".join(uneven)
        print(f"  scale-out-{driver} FAILED: " + out["error"], flush=True)
    return out


def all_cores_processes() -> int:
    """One worker process per core, as ``--processes auto`` would, kept to a number that shares
    the input's partitions evenly (scale_out.py fails an uneven split)."""
    cores = os.cpu_count() or 1
    return max(n for n in range(1, scale_out.PARTITIONS + 1) if n <= cores and scale_out.PARTITIONS % n == 0)


def run_all_cores(args: argparse.Namespace, driver: str, kind: str, input_topic: str) -> dict[str, Any]:
    """The ``kind`` pipeline (count per user, or 60 s tumbling finals) as one command on all cores
    (``streamkit worker --processes N``), in its stable window (median over repeats), its output
    checked by value: what a user running one command per machine gets, against the dataflow
    peers' all-cores runs. A run whose output is wrong or whose split is uneven fails it."""
    processes = all_cores_processes()
    runs, stolen_runs, rates, failures = [], [], [], []
    for rep in range(args.repeat):
        label = f"all-cores-{driver}-{kind} x{processes} (one command) #{rep + 1}"
        result, stolen_now = unstolen(lambda _again: with_steal(
            lambda: scale_out.measure(args.broker, driver, input_topic, processes, timeout=args.timeout,  # noqa: B023 - called within this same iteration
                                      one_command=True, kind=kind)),
            args.max_steal, label)
        runs.append(result)
        stolen_runs += stolen_now
        print(f"  {label}: {scale_out.describe(result)}{_steal(result)}", flush=True)
        if "error" in result:
            failures.append(f"{label}: {result['error']}")
        else:
            rates.append(result["records_per_s"])
    out: dict[str, Any] = {"processes": processes, "ok_runs": len(rates), "runs": runs, "stolen_runs": stolen_runs,
                           "max_steal_pct": _max_steal([r for r in runs if "error" not in r])}
    if rates:
        out["rps"] = statistics.median(rates)
    if failures:  # loud: a wrong output or an uneven split must not pass as a rate
        out["error"] = "; ".join(failures)
        print(f"  all-cores-{driver}-{kind} FAILED: " + out["error"], flush=True)
    return out


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
