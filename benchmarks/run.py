"""One command, one broker, one run: streamkit vs the raw clients vs faust-streaming, Quix Streams,
Bytewax and Pathway.

    python -m benchmarks run --broker 127.0.0.1:19092 --records 1000000 [--repeat 3]

1. creates a 4-partition input topic and fills it once (murmur2 keys ``user-<i % 1000>``, ~100-byte
   JSON values), and the join scenarios' topics if any is asked for (``join_inputs.py``:
   100,000 customers and ``--join-records`` orders; two topics of ``--join-records`` records);
2. installs faust-streaming and quixstreams into their own venv (``benchmarks/.peers-venv``,
   pinned versions), and Bytewax and Pathway into theirs (``dataflow_peers.py``), unless
   ``--no-peers``;
3. runs every scenario in its own process, interleaved over ``--repeat`` rounds (never two at
   once), each with a fresh output topic and consumer group: raw ceilings, stateless, stateful
   (count per key, RocksDB + changelog), exactly-once stateless — streamkit on both drivers, the
   peers on theirs (``--peer-records`` bounds the peers' share of the input, since faust runs at
   a few thousand records/s; rates stay comparable); and the joins, streamkit and Quix on the
   same ``--join-records`` (``join_runs.py``: a stream-table join, a windowed stream-stream join);
4. measures end-to-end latency at a third and at half of the stateless throughput it just
   measured (``latency.py``), and Quix Streams' at the same rates right after each (unless
   ``--no-peers``), 2 worker processes against 1, started apart and as one ``streamkit worker
   --processes 2`` command (``scale_out.py``), the stateful and windowed pipelines as one
   command on all cores (``--processes`` one per core, their outputs checked by value: against
   Bytewax's and Pathway's all-cores runs), and the stateful scenario
   over ``--state-keys`` distinct keys against its 1,000-key runs, with peak RSS
   (``state_size.py``), per driver;
5. runs the recovery benchmarks: streamkit (``recovery.py``: a ``--recovery-keys`` changelog
   restored into empty stores) and the peers restoring their own changelogs (``peer_recovery.py``);
6. prints one table (median records/s, min-max, CPU s, CPU µs/record, peak RSS) and the ratios
   the performance targets name, and writes everything to ``--json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import dataflow_peers
import join_inputs
import join_runs
import latency
from common import (
    STOLEN_RETRIES,
    admin_client,
    create_topic,
    delete_topics,
    rate_summary,
    run_peer_process,
    run_scenario_process,
    unstolen,
)
from extras import ALL_CORES_KINDS, EXTRAS, run_all_cores, run_latency, run_peer_recovery, run_recovery, run_scale_out
from peer_outputs import check_peer_output, expected_windows, read_topic
from quick_stateless import PARTITIONS, fill_input, topic_count
from state_size import run_state_size

HERE = Path(__file__).resolve().parent
PEERS_VENV = HERE / ".peers-venv"
PEER_PACKAGES = ["faust-streaming==0.15.3", "quixstreams==3.28.1", "rocksdict", "orjson"]
# the agent over a pyarrow RecordBatch (issue 50's columnar / raw target); skipped without pyarrow
COLUMNAR = ["streamkit-confluent-columnar", "streamkit-aiokafka-columnar"]
STREAMKIT = ["raw-confluent", "raw-aiokafka",
             "streamkit-confluent", "streamkit-aiokafka",
             "streamkit-confluent-stateful", "streamkit-aiokafka-stateful",
             "streamkit-confluent-eos", "streamkit-aiokafka-eos",
             "streamkit-confluent-windowed", "streamkit-aiokafka-windowed",
             "streamkit-confluent-function", "streamkit-aiokafka-function",  # def fn(order): the batch loop
             "streamkit-confluent-fold", "streamkit-aiokafka-fold", *COLUMNAR]
PEERS = ["quix-stateless", "quix-stateful", "quix-eos", "quix-windowed",
         "faust-stateless", "faust-stateful", "faust-eos", "faust-windowed"]


def ensure_peers_venv(log=print) -> Path:
    """The peers' interpreter, created and filled on first use."""
    python = PEERS_VENV / "bin" / "python"
    marker = PEERS_VENV / ".installed"
    if marker.exists() and marker.read_text() == " ".join(PEER_PACKAGES):
        return python
    log(f"installing {', '.join(PEER_PACKAGES)} into {PEERS_VENV} ...")
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    marker.write_text(" ".join(PEER_PACKAGES))
    return python


def run_peer(python: Path, scenario: str, args: argparse.Namespace, input_topic: str, output: str,
             group: str) -> dict[str, Any]:
    peer, kind = scenario.split("-", 1)
    return run_peer_process(python, HERE / "peers" / f"{peer}_app.py", scenario, [
        "--scenario", kind, "--broker", args.broker, "--input", input_topic, "--output", output, "--group", group,
        "--records", str(args.peer_records)], args.timeout)


def input_windows(args: argparse.Namespace, input_topic: str) -> Any:
    """The input's count per (user, minute), read once per run: what window finals must equal."""
    if getattr(args, "input_windows", None) is None:
        args.input_windows = expected_windows(read_topic(args.broker, input_topic))
    return args.input_windows


def output_kind(scenario: str) -> str | None:
    """How a scenario's output is checked by value: ``stateful`` (a count per key: the stateful
    and fold scenarios), ``windowed`` (window finals), or None (its count only)."""
    if dataflow_peers.is_dataflow(scenario):
        return dataflow_peers.kind(scenario)
    return {"stateful": "stateful", "fold": "stateful", "windowed": "windowed"}.get(scenario.rsplit("-", 1)[-1])


def check_values(scenario: str, args: argparse.Namespace, input_topic: str, output: str,
                 result: dict[str, Any]) -> None:
    """Counts per key and window finals read back and checked (``peer_outputs.py``), streamkit's
    as the peers': a count of outputs says nothing of their values. Not on a broker whose end
    offsets are inexact (the dev broker): the output could not be read to its end."""
    kind = output_kind(scenario)
    if "error" in result or kind is None or not getattr(args, "exact_counts", True):
        return
    try:
        result.update(check_peer_output(kind, read_topic(args.broker, output), result["consumed"],
                                        input_windows(args, input_topic) if kind == "windowed" else None))
    except Exception as exc:  # the run's figures stay; its output is not vouched for
        result.update(output_ok=False, check=f"output not checked: {exc!r}"[:500])
    for caveat in ("pathway-stateful", "pathway-windowed"):
        if scenario.startswith(caveat):
            result["check"] += dataflow_peers.CAVEATS[caveat]


def run_one(scenario: str, args: argparse.Namespace, input_topic: str, tag: str, peers_python: Path | None):
    if join_runs.is_join(scenario):
        return join_runs.run_join(scenario, args, args.join_inputs, tag, peers_python)
    output, group = f"bench-out-{tag}", f"bench-{tag}"
    create_topic(args.admin, output, PARTITIONS)
    topics = [output]
    if dataflow_peers.is_dataflow(scenario):  # they read the whole input: the connectors' bounded mode
        result = dataflow_peers.run(args.dataflow_python, scenario, args, input_topic, output, group)
        expected = args.records
    elif scenario.split("-")[0] in ("quix", "faust"):
        assert peers_python is not None
        result = run_peer(peers_python, scenario, args, input_topic, output, group)
        expected = args.peer_records
    else:
        result = run_scenario_process(str(HERE / "quick_stateless.py"), scenario, [
            "--broker", args.broker, "--records", str(args.records), "--input", input_topic, "--output", output,
            "--group", group, "--timeout", str(args.timeout)], args.timeout)
        expected = args.records
        if scenario.startswith("streamkit"):
            topics += [f"{group}-dlq", f"{group}-__leader", f"{group}-replies", f"{group}-__cluster"]
            if "stateful" in scenario or "windowed" in scenario or "fold" in scenario:
                topics.append(f"{group}-counts-changelog")
    result["output_records"] = topic_count(args.broker, output)
    # one output per input, except windowed scenarios (one per closed window) and Pathway's
    # count (one update per key per minibatch): the peers' values are checked below
    per_record = "windowed" not in scenario and not scenario.startswith("pathway-stateful")
    result["output_ok"] = result["output_records"] >= expected if args.exact_counts and per_record else None
    count_ok = result["output_ok"]
    check_values(scenario, args, input_topic, output, result)
    if count_ok is False:
        result["output_ok"] = False
    return result, topics


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok, summary = rate_summary(runs)
    if ok:
        summary["cpu_us_per_record"] = statistics.median(r["cpu_s"] / r["consumed"] * 1e6 for r in ok)
        checked = [r.get("output_ok") for r in runs if r.get("output_ok") is not None]
        summary["all_outputs_complete"] = all(checked) if checked else None  # None: broker cannot say
        summary["records"] = ok[0]["consumed"]
        summary.update(join_runs.summary_fields(ok))
    return summary


def ratios(summary: dict[str, dict[str, Any]], extras: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    def rate(name: str) -> float | None:
        s = summary.get(name) or {}
        return s.get("median_rps") if s.get("ok_runs") else None

    def ratio(a: str, b: str) -> float | None:
        ra, rb = rate(a), rate(b)
        return ra / rb if ra and rb else None

    out = {
        "stateless confluent / quix": ratio("streamkit-confluent", "quix-stateless"),
        "stateless confluent / raw confluent": ratio("streamkit-confluent", "raw-confluent"),
        "stateless aiokafka / quix": ratio("streamkit-aiokafka", "quix-stateless"),
        "stateless aiokafka / raw aiokafka": ratio("streamkit-aiokafka", "raw-aiokafka"),
        "stateless function confluent / raw confluent": ratio("streamkit-confluent-function", "raw-confluent"),
        "stateless function aiokafka / raw aiokafka": ratio("streamkit-aiokafka-function", "raw-aiokafka"),
        "stateless function / async for (confluent)": ratio("streamkit-confluent-function", "streamkit-confluent"),
        "stateless function / async for (aiokafka)": ratio("streamkit-aiokafka-function", "streamkit-aiokafka"),
        "columnar confluent / raw confluent": ratio("streamkit-confluent-columnar", "raw-confluent"),
        "columnar / stateless function (confluent)": ratio("streamkit-confluent-columnar", "streamkit-confluent-function"),
        "columnar / stateless function (aiokafka)": ratio("streamkit-aiokafka-columnar", "streamkit-aiokafka-function"),
        "fold / stateless function confluent": ratio("streamkit-confluent-fold", "streamkit-confluent-function"),
        "fold / stateless function aiokafka": ratio("streamkit-aiokafka-fold", "streamkit-aiokafka-function"),
        "windowed confluent / quix": ratio("streamkit-confluent-windowed", "quix-windowed"),
        "windowed aiokafka / quix": ratio("streamkit-aiokafka-windowed", "quix-windowed"),
        "windowed confluent / faust": ratio("streamkit-confluent-windowed", "faust-windowed"),
        "windowed aiokafka / faust": ratio("streamkit-aiokafka-windowed", "faust-windowed"),
        "stateful confluent / quix": ratio("streamkit-confluent-stateful", "quix-stateful"),
        "stateful aiokafka / quix": ratio("streamkit-aiokafka-stateful", "quix-stateful"),
        "stateful confluent / faust": ratio("streamkit-confluent-stateful", "faust-stateful"),
        "stateful aiokafka / faust": ratio("streamkit-aiokafka-stateful", "faust-stateful"),
        "stateful / stateless confluent": ratio("streamkit-confluent-stateful", "streamkit-confluent"),
        "stateful / stateless aiokafka": ratio("streamkit-aiokafka-stateful", "streamkit-aiokafka"),
        "eos / alo confluent": ratio("streamkit-confluent-eos", "streamkit-confluent"),
        "eos / alo aiokafka": ratio("streamkit-aiokafka-eos", "streamkit-aiokafka"),
        "eos confluent / quix eos": ratio("streamkit-confluent-eos", "quix-eos"),
        **join_runs.ratios(rate, summary),
        **dataflow_peers.ratios(rate, extras, summary),
    }
    for driver in ("confluent", "aiokafka"):
        lat = extras.get(f"latency-{driver}") or {}
        if lat.get("ok_runs"):
            out[f"latency {driver} at {lat['rate']:,} rec/s: p50 ms"] = lat["median_p50_ms"]
            out[f"latency {driver} at {lat['rate']:,} rec/s: p99 ms"] = lat["median_p99_ms"]
            out[f"latency {driver} at {lat['rate']:,} rec/s: p99.9 ms"] = lat["median_p999_ms"]
            out[f"latency {driver} at {lat['rate']:,} rec/s: max ms"] = lat["median_max_ms"]
            for stage in latency.STAGES if lat.get("median_stages") else ():  # where the time goes
                for what in ("p50", "p99"):
                    out[f"latency {driver}: {stage} {what} ms"] = lat["median_stages"][f"{stage}_{what}_ms"]
                out[f"latency {driver}: {stage} mean ms in the p99 tail"] = lat["median_stages"][f"tail_{stage}_mean_ms"]
            out[f"latency {driver}: largest steal % of its runs"] = lat.get("max_steal_pct")
        third = lat.get("third") or {}
        if third.get("ok_runs"):
            out[f"latency {driver} at {third['rate']:,} rec/s (a third): p50 ms"] = third["median_p50_ms"]
            out[f"latency {driver} at {third['rate']:,} rec/s (a third): p99 ms"] = third["median_p99_ms"]
        for load, ours in (("half", lat), ("third", third)):  # Quix at the same rate, in the same run
            quix = (lat.get("quix") or {}).get(load) or {}
            if quix.get("ok_runs"):
                at = f"at {quix['rate']:,} rec/s ({load}"
                out[f"latency quix {at}, beside {driver}): p50 ms"] = quix["median_p50_ms"]
                out[f"latency quix {at}, beside {driver}): p99 ms"] = quix["median_p99_ms"]
                if not quix["all_sustained"]:
                    out[f"latency quix {at}) NOT SUSTAINED: rec/s out"] = quix["median_output_rps"]
                if ours.get("ok_runs"):
                    out[f"latency {driver} / quix p99 {at})"] = ours["median_p99_ms"] / quix["median_p99_ms"]
        scale = extras.get(f"scale-out-{driver}") or {}
        out[f"scale-out {driver}: 2 workers / 1"] = scale.get("ratio")
        out[f"scale-out {driver}: 2 processes (one command) / 1"] = scale.get("ratio_one_command")
        if scale.get("ok_runs"):
            out[f"scale-out {driver}: largest steal % of its runs"] = scale.get("max_steal_pct")
        state = extras.get(f"state-size-{driver}") or {}
        if state.get("ok_runs"):
            out[f"stateful {driver}: {state['keys']:,} keys / 1,000 keys"] = state["ratio"]
            out[f"stateful {driver}: peak RSS MB, {state['keys']:,} keys"] = state["peak_rss_mb"]
            out[f"stateful {driver}: peak RSS MB, 1,000 keys"] = state["small_peak_rss_mb"]
    recovery = (extras.get("recovery") or {}).get("summary") or {}
    peers = (extras.get("peer-recovery") or {}).get("summary") or {}
    peer_rates = [s["median_rps"] for s in peers.values() if s.get("ok_runs")]
    for name, s in recovery.items():
        if s.get("ok_runs"):
            out[f"recovery {name} (rec/s)"] = s["median_rps"]
            if peer_rates and not name.startswith("raw"):
                out[f"recovery {name} / faster peer"] = s["median_rps"] / max(peer_rates)
            ceiling = recovery.get("raw-confluent") or {}
            if ceiling.get("ok_runs") and not name.startswith("raw"):
                out[f"recovery {name} / raw consume ceiling"] = s["median_rps"] / ceiling["median_rps"]
    for name, s in peers.items():
        if s.get("ok_runs"):
            out[f"recovery {name} (rec/s, {s.get('keys')} keys)"] = s["median_rps"]
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def print_table(summary: dict[str, dict[str, Any]], out: dict[str, float | None]) -> None:
    header = (f"{'scenario':<30}{'records':>9}{'median rec/s':>14}{'min-max rec/s':>22}{'CPU s':>8}"
              f"{'CPU us/rec':>12}{'peak RSS MB':>13}{'steal %':>9}  output")
    print(header)
    print("-" * len(header))
    for name, s in summary.items():
        if not s.get("ok_runs"):
            print(f"{name:<30}{'':>9}{'FAILED':>14}  {s.get('errors')}")
            continue
        span = f"{s['min_rps']:,.0f}-{s['max_rps']:,.0f}"
        print(f"{name:<30}{s['records']:>9}{s['median_rps']:>14,.0f}{span:>22}{s['median_cpu_s']:>8.2f}"
              f"{s['cpu_us_per_record']:>12.1f}{s['max_peak_rss_mb']:>13.1f}{_pct(s.get('max_steal_pct')):>9}  "
              f"{ {True: 'complete', False: 'INCOMPLETE', None: 'unchecked'}[s['all_outputs_complete']]}")
    print()
    for name, value in out.items():
        print(f"{name:<44} {'n/a' if value is None else f'{value:,.2f}'}")


def skip_unsupported(args: argparse.Namespace, scenarios: list[str]) -> dict[str, str]:
    """Scenarios this broker cannot run (the dev broker: no aiokafka transactions), with why;
    and whether output topics can be counted from their end offsets."""
    from streamkit.testing.capabilities import Capabilities

    caps = Capabilities(args.broker)
    args.exact_counts, inexact = caps.check("end_offsets_exact")
    if not args.exact_counts:
        print(f"output counts not checked: {inexact}", flush=True)
    skipped = {}
    why_not_columnar = columnar_unavailable()
    if why_not_columnar is not None:
        skipped.update({name: why_not_columnar for name in COLUMNAR if name in scenarios})
    for name in ("streamkit-aiokafka-eos", "faust-eos"):  # faust's transactions are aiokafka's
        if name in scenarios:
            ok, why = caps.check("aiokafka_transactions")
            if not ok:
                skipped[name] = why
    if not args.exact_counts:  # a restore ends at, and is verified against, the end offsets
        skipped.update({name: f"recovery needs exact end offsets ({inexact})"
                        for name in ("recovery", "peer-recovery") if name in scenarios})
    for name, why in skipped.items():
        print(f"skipped {name}: {why}", flush=True)
    return skipped


def columnar_unavailable() -> str | None:
    """Why the columnar scenarios cannot run here (None: they can)."""
    try:
        import pyarrow  # noqa: F401 - only whether it imports
    except ImportError:
        return "pyarrow is not installed (pip install 'streamkit[columnar]')"
    return None


def run_extra(name: str, measure: Any) -> dict[str, Any]:
    """One extra scenario; a failure is reported and recorded, not the end of the run (whose
    measurements so far would be lost with it)."""
    try:
        return measure()
    except Exception as exc:
        print(f"  {name}: FAILED {exc!r}"[:2000], flush=True)
        return {"error": repr(exc)[:2000], "ok_runs": 0}


def select_scenarios(args: argparse.Namespace) -> list[str]:
    """Every scenario in run order (the peers' unless ``--no-peers``), or the ``--scenarios``
    subset (a name that is no scenario is refused); the recovery ones only with
    ``--recovery-keys`` > 0."""
    peers = [] if args.no_peers else PEERS + dataflow_peers.SCENARIOS + join_runs.PEER_JOINS
    scenarios = STREAMKIT + join_runs.JOINS + peers + EXTRAS[:-1] + ([] if args.no_peers else EXTRAS[-1:])
    if args.scenarios:
        asked = args.scenarios.split(",")
        every = (STREAMKIT + join_runs.JOINS + PEERS + dataflow_peers.SCENARIOS + join_runs.PEER_JOINS
                 + EXTRAS)
        unknown = [s for s in asked if s not in every]
        if unknown:
            raise SystemExit(f"--scenarios: {', '.join(unknown)} is no scenario of this run; pick from "
                             f"{', '.join(every)}")
        scenarios = [s for s in scenarios if s in asked]
    if args.recovery_keys <= 0:
        scenarios = [s for s in scenarios if "recovery" not in s]
    return scenarios


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--broker", required=True, help="HOST:PORT")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--peer-records", type=int, default=100_000, help="records each peer run processes")
    parser.add_argument("--join-records", type=int, default=200_000,
                        help="orders (join-table) and records per side (join-window), streamkit and Quix alike")
    parser.add_argument("--recovery-keys", type=int, default=1_000_000, help="0 skips the recovery benchmark")
    parser.add_argument("--state-keys", type=int, default=10_000_000,
                        help="distinct keys (one record each) of the state-size scenarios")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-steal", type=float, default=None,
                        help=f"run a scenario again (up to {STOLEN_RETRIES} times: a main-table scenario, a latency run, "
                             "a scale-out run; not the state-size or recovery measures) when the hypervisor took "
                             "more than this percentage of the machine's CPU during its run (shared VMs); the "
                             "stolen runs are kept in the JSON (stolen_runs), out of the medians")
    parser.add_argument("--scenarios", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--no-peers", action="store_true",
                        help="skip faust-streaming, quixstreams, bytewax and pathway (their scenarios and Quix's "
                             "latency runs)")
    parser.add_argument("--latency-seconds", type=float, default=15.0, help="input duration of each latency run")
    parser.add_argument("--peer-recovery-faust-keys", type=int, default=200_000,
                        help="faust restores ~9k records/s: fewer keys keep its recovery runs short")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per scenario run")
    parser.add_argument("--json", default=str(HERE / "results" / "run.json"))
    args = parser.parse_args(argv)
    scenarios = select_scenarios(args)
    skipped = skip_unsupported(args, scenarios)
    if any(dataflow_peers.is_dataflow(s) for s in scenarios):
        args.dataflow_python, why = dataflow_peers.ensure_venv()
        if args.dataflow_python is None:
            for name in (s for s in scenarios if dataflow_peers.is_dataflow(s)):
                skipped[name] = why
                print(f"skipped {name}: {why}", flush=True)
    scenarios = [s for s in scenarios if s not in skipped]
    extras_wanted = [s for s in scenarios if s in EXTRAS]
    scenarios = [s for s in scenarios if s not in EXTRAS]
    peers_python = None
    if (any(s.split("-")[0] in ("quix", "faust") for s in scenarios) or "peer-recovery" in extras_wanted
            or (not args.no_peers and any(e.startswith("latency") for e in extras_wanted))):  # Quix's latency
        peers_python = ensure_peers_venv()
    run_id = uuid.uuid4().hex[:8]
    input_topic = f"bench-in-{run_id}"
    args.admin = admin_client(args.broker)
    created: list[str] = []
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in scenarios}
    stolen_runs: dict[str, list[dict[str, Any]]] = {s: [] for s in scenarios}
    extras: dict[str, dict[str, Any]] = {}
    try:
        if any(not join_runs.is_join(s) for s in scenarios) or any(
                e.startswith(("scale-out", "all-cores")) for e in extras_wanted):
            # Kafka's defaults, spelled out: the dev broker describes only configs set explicitly, and
            # Quix derives its changelog's config from the input topic's retention settings.
            create_topic(args.admin, input_topic, PARTITIONS, {"retention.ms": "604800000", "retention.bytes": "-1"})
            created.append(input_topic)
            fill_s = fill_input(args.broker, input_topic, args.records)
            print(f"broker {args.broker}: filled {input_topic} with {topic_count(args.broker, input_topic)} records "
                  f"in {fill_s:.1f}s", flush=True)
        args.join_inputs = join_inputs.prepare(
            args.admin, args.broker, run_id, args.join_records, table=any("join-table" in s for s in scenarios),
            window=any("join-window" in s for s in scenarios), created=created)
        if args.join_inputs.topics:
            print(f"join inputs: {', '.join(args.join_inputs.topics)} ({args.join_records} orders, or records per "
                  f"side; {join_inputs.CUSTOMERS} customers) in {args.join_inputs.fill_s:.1f}s", flush=True)
        print(f"{len(scenarios)} scenarios x {args.repeat}, then {', '.join(extras_wanted) or 'nothing else'}",
              flush=True)
        for rep in range(args.repeat):
            for scenario in scenarios:

                def attempt(again: int, scenario: str = scenario, rep: int = rep) -> dict[str, Any]:
                    result, topics = run_one(scenario, args, input_topic,
                                             f"{run_id}-{scenario}-{rep}" + (f"-{again}" if again else ""),
                                             peers_python)
                    created.extend(topics)
                    return result

                result, stolen_now = unstolen(attempt, args.max_steal, f"{scenario} #{rep + 1}")
                stolen_runs[scenario] += stolen_now
                runs[scenario].append(result)
                if "error" in result:
                    print(f"  {scenario} #{rep + 1}: FAILED {result['error']}\n{result.get('stderr', '')[-1500:]}",
                          flush=True)
                else:
                    print(f"  {scenario} #{rep + 1}: {result['records_per_s']:,.0f} rec/s "
                          f"({result['consumed']} in {result['elapsed_s']:.1f}s), out {result['output_records']}"
                          f"{join_runs.describe(result)}" + (f"; {result['check']}" if "check" in result else "")
                          + (f"; parallelism {result['parallelism']}" if "parallelism" in result else ""),
                          flush=True)
        summary = {s: summarize(r) for s, r in runs.items()}
        for driver in ("confluent", "aiokafka"):
            stateless = (summary.get(f"streamkit-{driver}") or {}).get("median_rps")
            stateful = summary.get(f"streamkit-{driver}-stateful") or {}
            for name, measure in ((f"latency-{driver}", lambda: run_latency(args, driver, stateless, peers_python)),  # noqa: B023 - called within this same iteration
                                  (f"scale-out-{driver}", lambda: run_scale_out(args, driver, input_topic)),  # noqa: B023 - called within this same iteration
                                  *((f"all-cores-{driver}-{kind}",
                                     lambda kind=kind: run_all_cores(args, driver, kind, input_topic))  # noqa: B023 - called within this same iteration
                                    for kind in ALL_CORES_KINDS),
                                  (f"state-size-{driver}", lambda: run_state_size(args, driver, run_id, stateful,  # noqa: B023 - called within this same iteration
                                                                                  created))):
                if name in extras_wanted:
                    extras[name] = run_extra(name, measure)
    finally:
        delete_topics(args.admin, created)
    if "recovery" in extras_wanted:
        extras["recovery"] = run_recovery(args)
    if "peer-recovery" in extras_wanted:
        extras["peer-recovery"] = run_peer_recovery(args)
    out = ratios(summary, extras)
    print()
    print_table(summary, out)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "benchmark": "run", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "broker": args.broker,
        "records": args.records, "peer_records": args.peer_records, "join_records": args.join_records,
        "repeat": args.repeat,
        "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
        "skipped": skipped, "summary": summary, "ratios": out,
        "extras": {k: v for k, v in extras.items() if k not in ("recovery", "peer-recovery")},
        "recovery": (extras.get("recovery") or {}).get("summary"),
        "peer_recovery": (extras.get("peer-recovery") or {}).get("summary"), "runs": runs,
        "stolen_runs": stolen_runs, "max_steal": args.max_steal,
    }, indent=2))
    print(f"\nresults written to {path}")
    failed = [s for s, v in summary.items() if not v.get("ok_runs")] + [
        name for name, v in extras.items() if "error" in v or v.get("ok_runs") == 0 or
        (name.endswith("recovery") and not any(s.get("ok_runs") for s in (v.get("summary") or {}).values()))]
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0
