"""Bytewax and Pathway as peers of ``python -m benchmarks run``: stateless, stateful, windowed.

Both are dataflow engines with a Rust core (Timely Dataflow) and their own Kafka connectors,
which read a topic to its end and stop (Bytewax ``tail=False``, Pathway ``mode="static"``): a run
covers the whole input (``--records``), not ``--peer-records``. They run from a venv of their own
(``benchmarks/.dataflow-peers-venv``, made on first use: Pathway brings ~1.5 GB of dependencies,
and its pins need not agree with faust's or Quix's); when it cannot be installed, their
scenarios are skipped with a printed line saying why.

Parallelism: each peer's default (Bytewax: one process, one worker, as ``python -m bytewax.run``
without ``-w``; Pathway: ``PATHWAY_THREADS`` unset, one thread), the same single process a
streamkit scenario runs in; the ``*-all-cores`` scenarios give them one worker (Bytewax) or
thread (Pathway) per core of this machine, against streamkit's all-cores figures (one worker
process per core is how streamkit uses more cores): the stateless pipeline's scale-out run, the
stateful and windowed ones' ``all-cores-*`` runs (``extras.py``).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from common import run_peer_process

HERE = Path(__file__).resolve().parent
VENV = HERE / ".dataflow-peers-venv"
PACKAGES = ["bytewax[kafka]==0.21.1", "pathway==0.33.0", "orjson"]
PEERS = ("bytewax", "pathway")
ALL_CORES = "-all-cores"
DRIVERS = ("confluent", "aiokafka")
# printed with its ratios and its stateful check: what its figures are not
CAVEATS = {"pathway": " (over its whole pw.run(), start included)",
           "pathway-stateful": " (Pathway: one update per key per minibatch, not a count per record; "
                               "final counts checked, not output count)",
           "pathway-windowed": " (Pathway: one event time over all partitions read; exactly_once_behavior drops "
                               "a record behind it, so a final can be short or missing)"}
SCENARIOS = [f"{peer}-{kind}{cores}" for peer in PEERS for kind in ("stateless", "stateful", "windowed")
             for cores in ("", ALL_CORES)]


def is_dataflow(scenario: str) -> bool:
    return scenario.split("-")[0] in PEERS


def kind(scenario: str) -> str:
    """``stateless``, ``stateful`` or ``windowed``."""
    return scenario.split("-")[1]


def ensure_venv(log: Callable[[str], None] = print) -> tuple[Path | None, str]:
    """Their interpreter, made and filled on first use; or None and why it could not be."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    if marker.exists() and marker.read_text() == " ".join(PACKAGES):
        return python, ""
    log(f"installing {', '.join(PACKAGES)} into {VENV} (~1.6 GB, a few minutes) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True, text=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True, capture_output=True,
                       text=True)
    except subprocess.CalledProcessError as exc:
        return None, f"installing {' '.join(PACKAGES)} failed: {(exc.stderr or '').strip()[-500:]}"
    marker.write_text(" ".join(PACKAGES))
    return python, ""


def run(python: Path, scenario: str, args: argparse.Namespace, input_topic: str, output: str,
        group: str) -> dict[str, Any]:
    """One scenario in its own process, at its peer's default parallelism or one per core."""
    peer = scenario.split("-")[0]
    cores = (os.cpu_count() or 1) if scenario.endswith(ALL_CORES) else 0
    extra = [] if not cores else ["--workers" if peer == "bytewax" else "--threads", str(cores)]
    result = run_peer_process(python, HERE / "peers" / f"{peer}_app.py", scenario, [
        "--scenario", kind(scenario), "--broker", args.broker, "--input", input_topic, "--output", output,
        "--group", group, *extra], args.timeout)
    result["parallelism"] = (f"{cores} {'workers' if peer == 'bytewax' else 'threads'}" if cores
                             else "default (1 " + ("worker" if peer == "bytewax" else "thread") + ")")
    return result


def ratios(rate: Callable[[str], float | None], extras: dict[str, dict[str, Any]],
           ran: Iterable[str]) -> dict[str, float | None]:
    """streamkit / each of them, on both drivers, per scenario that ``ran``: one process against
    their default; at all cores, theirs over their default, and streamkit on all cores / theirs
    (``extras``, when measured: the stateless pipeline's two-worker scale-out rate, the stateful
    and windowed ones' ``all-cores-*`` runs; their stable windows, not the same clock)."""
    ours = {"stateless": "streamkit-{driver}", "stateful": "streamkit-{driver}-stateful",
            "windowed": "streamkit-{driver}-windowed"}
    out: dict[str, float | None] = {}
    for scenario in (s for s in SCENARIOS if s in set(ran)):
        theirs, peer, what = rate(scenario), scenario.split("-")[0], kind(scenario)
        if scenario.endswith(ALL_CORES):
            default = rate(scenario.removesuffix(ALL_CORES))
            out[f"{scenario.removesuffix(ALL_CORES)}: all cores / default"] = \
                theirs / default if theirs and default else None
            for driver in DRIVERS:
                mine = all_cores_rate(extras, driver, what)
                if mine and theirs:
                    out[f"{what} {driver} all cores / {peer} all cores"] = mine / theirs
            continue
        for driver in DRIVERS:
            mine = rate(ours[what].format(driver=driver))
            label = f"{what} {driver} / {peer}" + (CAVEATS["pathway"] if peer == "pathway" else "") + (
                " (its finals can be short or missing)" if scenario == "pathway-windowed" else "")
            out[label] = mine / theirs if mine and theirs else None
    return out


def all_cores_rate(extras: dict[str, dict[str, Any]], driver: str, what: str) -> float | None:
    """streamkit's ``what`` pipeline on all cores: the stateless one's two workers (scale-out),
    the others' one-command runs (``all-cores-<driver>-<kind>``)."""
    if what == "stateless":
        rps: float | None = (extras.get(f"scale-out-{driver}") or {}).get("two_workers_rps")
    else:
        rps = (extras.get(f"all-cores-{driver}-{what}") or {}).get("rps")
    return rps
