"""How cost grows with state: the stateful scenario (count per key in a RocksDB table, changelog
included) over an input whose every record has its own key (``--state-keys`` of them, 10M by
default), against the same scenario over the main input's 1,000 keys measured in the same run.

Reports the rate ratio and both runs' peak RSS: the write caches are emptied by a checkpoint
once they hold ``table_cache_max_keys`` keys, and RocksDB's blocks and memtables share one
``block_cache_size`` per worker, so the peak should stay near the 1,000-key run's plus that cache.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from common import create_topic, run_scenario_process
from quick_stateless import PARTITIONS, fill_input, topic_count

HERE = Path(__file__).resolve().parent


def prepare_input(args: argparse.Namespace, run_id: str, created: list[str]) -> str:
    """One input for both drivers: ``--state-keys`` records, each key once."""
    topic = getattr(args, "state_input", None)
    if topic is None:
        topic = args.state_input = f"bench-keys-{run_id}"
        create_topic(args.admin, topic, PARTITIONS, {"retention.ms": "604800000", "retention.bytes": "-1"})
        created.append(topic)
        fill_s = fill_input(args.broker, topic, args.state_keys, keys=args.state_keys,
                            per_second=max(1000, args.state_keys // 1800))  # event time within 30 minutes
        print(f"state size: filled {topic} with {args.state_keys:,} records of distinct keys in {fill_s:.1f}s",
              flush=True)
    return topic


def run_state_size(args: argparse.Namespace, driver: str, run_id: str, small: dict[str, Any],
                   created: list[str]) -> dict[str, Any]:
    """One run over distinct keys (they take minutes at 10M); the ratio is against the median
    of the 1,000-key stateful runs of this same command."""
    if not small.get("ok_runs"):
        return {"error": f"no streamkit-{driver}-stateful run to compare with", "ok_runs": 0}
    topic = prepare_input(args, run_id, created)
    scenario = f"streamkit-{driver}-stateful"
    tag = f"{run_id}-state-size-{driver}"
    output, group = f"bench-out-{tag}", f"bench-{tag}"
    create_topic(args.admin, output, PARTITIONS)
    created += [output, f"{group}-dlq", f"{group}-__leader", f"{group}-replies", f"{group}-__cluster",
                f"{group}-counts-changelog"]
    result = run_scenario_process(str(HERE / "quick_stateless.py"), scenario, [
        "--broker", args.broker, "--records", str(args.state_keys), "--input", topic, "--output", output,
        "--group", group, "--timeout", str(args.timeout)], args.timeout)
    if "error" in result:
        print(f"  state-size-{driver}: FAILED {result['error']}\n{result.get('stderr', '')[-1500:]}", flush=True)
        return {"ok_runs": 0, "runs": [result]}
    result["output_records"] = topic_count(args.broker, output)
    summary = {
        "ok_runs": 1, "keys": args.state_keys, "rps": result["records_per_s"],
        "peak_rss_mb": result["peak_rss_mb"], "small_rps": small["median_rps"], "small_keys": 1000,
        "small_peak_rss_mb": small["max_peak_rss_mb"], "ratio": result["records_per_s"] / small["median_rps"],
        "output_complete": result["output_records"] >= args.state_keys if args.exact_counts else None,
        "runs": [result],
    }
    print(f"  state-size-{driver}: {summary['rps']:,.0f} rec/s over {args.state_keys:,} keys "
          f"({summary['ratio']:.2f}x the 1,000-key run), peak RSS {summary['peak_rss_mb']:.0f} MB "
          f"(1,000 keys: {summary['small_peak_rss_mb']:.0f} MB)", flush=True)
    return summary
