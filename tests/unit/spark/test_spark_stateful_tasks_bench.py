"""benchmarks/spark_stateful_tasks.py, the documented profiling command, runs the stateful Spark
processors without Spark and gives the outputs the agents make."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[3]


def test_the_task_benchmark_runs_each_scenario() -> None:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.spark_stateful_tasks", "--records", "3000"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {m[0]: (int(m[1]), int(m[2]), int(m[3])) for m in
             re.findall(r"^(\w+): (\d+) records, (\d+) groups, (\d+) outputs", proc.stdout, re.M)}
    assert found["count"] == (3000, 1000, 1000)  # one changelog entry per user
    assert found["join"] == (3000, 1000, 3000)  # one enriched order per order
    assert found["window"][:2] == (3000, 4) and found["window"][2] > 0  # per table partition
