"""Peer table-recovery benchmark: how fast faust-streaming and Quix Streams restore a count-per-key
RocksDB table of K keys from its changelog topic into an EMPTY state directory.

    python benchmarks/peer_recovery.py --broker 127.0.0.1:19092 --keys 1000000 --repeat 3 \\
        --json /tmp/peer_recovery.json [--faust-keys N]

Runs with the main venv; the peers run in ``benchmarks/.peers-venv`` (``peers/quix_recovery.py``,
``peers/faust_recovery.py``, whose docstrings say how each fills its changelog and detects the end
of recovery). Steps, one peer process at a time:

1. per peer, unique topics: ``<group>-in`` (4 partitions); quix: filled with K records with
   distinct keys ``key-<i>``, then the Quix app (``--phase fill``) builds its changelog from them;
   faust: ``<group>-counts-changelog`` (4 partitions, compacted) written directly in faust's table
   changelog format (``--phase fill``), as running faust's app over 1M records takes minutes;
2. ``--repeat`` rounds, each one restore per peer (``--phase restore``) in a fresh process with a
   fresh empty state dir and the same group (the changelog name depends on it), after a
   ``--pause`` so the previous run's group member has left / timed out;
3. records/s = changelog records / seconds from app construction (after imports) to the peer's
   recovery-complete signal; a run counts only if the peer verified the restored store (K keys,
   200 spot-checked values, K changelog records);
4. deletes its topics and groups, prints a table, writes ``--json``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import admin_client, create_topic, delete_topics, produce_all, rate_summary  # benchmarks/ is on sys.path

HERE = Path(__file__).resolve().parent
PEERS_PYTHON = HERE / ".peers-venv" / "bin" / "python"
PARTITIONS = 4


def run_peer(peer: str, phase: str, group: str, keys: int, args: argparse.Namespace,
             state_dir: str | None = None) -> dict[str, Any]:
    """Run ``peers/<peer>_recovery.py`` once; return its RESULT (or an ``error`` entry)."""
    cmd = [str(PEERS_PYTHON), str(HERE / "peers" / f"{peer}_recovery.py"), "--broker", args.broker,
           "--keys", str(keys), "--phase", phase, "--group", group]
    if state_dir:
        cmd += ["--state-dir", state_dir]
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=str(HERE / "peers"),
                              check=False)
    except subprocess.TimeoutExpired as exc:
        return {"error": f"timeout after {args.timeout}s", "stderr": str(exc.stderr)[-2000:]}
    result = None
    for line in proc.stdout.splitlines():
        if "RESULT {" in line:  # faust's logging may prefix stdout lines
            result = json.loads(line[line.index("RESULT {") + len("RESULT "):])
    if result is None or proc.returncode != 0:
        result = {**(result or {}), "error": f"exit {proc.returncode}", "stderr": proc.stderr[-3000:]}
    elif phase == "restore" and not result.get("verified"):
        result["error"] = "restored store failed verification"
    result["process_s"] = time.perf_counter() - started
    return result


def prepare(peer: str, group: str, keys: int, args: argparse.Namespace, admin: Any, topics: list[str]) -> dict:
    create_topic(admin, f"{group}-in", PARTITIONS)
    topics.append(f"{group}-in")
    if peer == "quix":
        topics.append(f"changelog__{group}--{group}-in--default")  # created by Quix in the fill phase
        produce_all(args.broker, f"{group}-in",
                    ((b"key-%d" % i, b'{"user": "key-%d"}' % i) for i in range(keys)), "input records")
    else:
        create_topic(admin, f"{group}-counts-changelog", PARTITIONS, {"cleanup.policy": "compact"})
        topics += [f"{group}-counts-changelog", f"{group}-__assignor-__leader"]  # faust creates the latter
    return run_peer(peer, "fill", group, keys, args)


def delete_groups(admin: Any, groups: list[str], wait: float) -> None:
    """Best effort; a faust member that exited without LeaveGroup keeps its group non-empty until
    its session times out, so retry once after ``wait`` seconds."""
    for attempt in range(2):
        failed = []
        for group, future in admin.delete_consumer_groups(groups, request_timeout=30).items():
            try:
                future.result(30)
            except Exception as exc:  # noqa: BLE001 - best effort cleanup
                if "GROUP_ID_NOT_FOUND" not in str(exc):
                    failed.append((group, exc))
        if not failed:
            return
        groups = [g for g, _ in failed]
        if attempt == 0:
            time.sleep(wait)
    print(f"  (could not delete groups: {failed})", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="127.0.0.1:19092")
    parser.add_argument("--keys", type=int, default=1_000_000, help="table keys (= changelog records) for quix")
    parser.add_argument("--faust-keys", type=int, help="table keys for faust (default: --keys; 1M takes ~2 min per restore)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peers", default="quix,faust")
    parser.add_argument("--pause", type=float, default=8.0, help="seconds before each restore (faust session 6 s)")
    parser.add_argument("--timeout", type=float, default=900.0, help="per peer process")
    parser.add_argument("--json", default=str(HERE / "results" / "peer_recovery.json"))
    args = parser.parse_args()
    if not PEERS_PYTHON.exists():
        raise SystemExit(f"{PEERS_PYTHON} missing: create it with benchmarks/run.py (peers venv) first")

    tag = uuid.uuid4().hex[:8]
    peers = [p for p in args.peers.split(",") if p]
    args.faust_keys = args.faust_keys or args.keys
    keys = {"quix": args.keys, "faust": args.faust_keys}
    groups = {peer: f"bench-{peer}-recovery-{tag}" for peer in peers}
    admin = admin_client(args.broker)
    topics: list[str] = []
    fills: dict[str, dict] = {}
    runs: dict[str, list[dict]] = {f"{peer}-recovery": [] for peer in peers}
    try:
        for peer in peers:
            print(f"fill {peer}: {keys[peer]} keys ...", flush=True)
            fills[peer] = prepare(peer, groups[peer], keys[peer], args, admin, topics)
            print(f"  {json.dumps({k: v for k, v in fills[peer].items() if k != 'stderr'})}", flush=True)
            if "error" in fills[peer]:
                print(fills[peer].get("stderr", ""), file=sys.stderr)
        for rep in range(args.repeat):
            for peer in (p for p in peers if "error" not in fills[p]):
                time.sleep(args.pause)
                state_dir = tempfile.mkdtemp(prefix=f"{peer}-recovery-state-")
                try:
                    result = run_peer(peer, "restore", groups[peer], keys[peer], args, state_dir)
                finally:
                    shutil.rmtree(state_dir, ignore_errors=True)
                runs[f"{peer}-recovery"].append(result)
                shown = ("ERROR " + result["error"]) if "error" in result else (
                    f"{result['records_per_s']:,.0f} rec/s, {result['elapsed_s']:.2f} s, verified={result['verified']}")
                print(f"  round {rep + 1} {peer}: {shown}", flush=True)
                if "error" in result:
                    print(result.get("stderr", "")[-1500:], file=sys.stderr)
    finally:
        delete_topics(admin, [t for t in topics if t in admin.list_topics(timeout=10).topics])
        delete_groups(admin, list(groups.values()), args.pause)

    summary = {}
    print(f"\n{'scenario':<16}{'keys':>10}{'median rec/s':>14}{'min-max rec/s':>22}{'ok':>5}")
    for peer in peers:
        name = f"{peer}-recovery"
        _, summary[name] = rate_summary(runs[name])
        summary[name]["keys"] = keys[peer]
        s = summary[name]
        if s["ok_runs"]:
            print(f"{name:<16}{keys[peer]:>10}{s['median_rps']:>14,.0f}"
                  f"{s['min_rps']:>11,.0f}-{s['max_rps']:<10,.0f}{s['ok_runs']:>5}")
        else:
            print(f"{name:<16}{keys[peer]:>10}{'failed':>14}")
    if "faust" in peers and args.faust_keys != args.keys:
        print(f"note: faust restored {args.faust_keys} keys, quix {args.keys} (rates are per record)")
    out = {"summary": summary, "runs": runs, "fills": fills,
           "config": {**vars(args), "groups": groups, "partitions": PARTITIONS}}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
