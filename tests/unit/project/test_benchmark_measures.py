"""The benchmarks' peak RSS is each scenario process's own: ``ru_maxrss`` of a process started
by vfork (Python's subprocess) begins at its parent's peak, so every scenario reported at least
the orchestrator's (the 10M-key runs of both drivers printed the same 749 MB)."""
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def test_a_scenario_process_reports_its_own_peak_rss_not_its_parents():
    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"\x01" * (len(ballast) // 4096)  # every page resident in this process
    for where, module in ((BENCHMARKS, "common"), (BENCHMARKS / "peers", "measure")):
        out = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.peak_rss_mb())"], cwd=where,
                             capture_output=True, text=True, check=True)
        assert float(out.stdout) < 200, (module, out.stdout)  # its own: tens of MB, not the 400 here
    assert len(ballast) == 400 * 1024 * 1024


def test_steal_is_the_share_of_machine_time_given_away_between_two_readings():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert common.steal_pct((100, 1000), (400, 2000)) == 30.0
    assert common.steal_pct((5, 10), (5, 10)) is None  # no time passed: no share
    steal, total = common.cpu_ticks()
    assert total > 0 and 0 <= steal <= total  # this Linux machine has /proc/stat


def test_a_run_counts_as_stolen_only_over_the_given_share_and_only_when_asked():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert common.stolen({"steal_pct": 38.0}, 15)
    assert not common.stolen({"steal_pct": 4.0}, 15)
    assert not common.stolen({"steal_pct": 38.0}, None)  # not asked: every run counts, as before
    assert not common.stolen({"steal_pct": None}, 15)  # no /proc/stat: nothing to judge by
    assert not common.stolen({"steal_pct": 38.0, "error": "timeout"}, 15)  # a failure is reported, not retried


def test_a_stolen_run_is_made_again_at_most_twice_and_kept_apart():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    attempts: list[int] = []

    def measuring(*steals: float):
        def measure(again: int) -> dict:
            attempts.append(again)
            return {"n": again, "steal_pct": steals[again]}
        return measure

    kept, stolen_runs = common.unstolen(measuring(40.0, 3.0), 15, "x")
    assert kept == {"n": 1, "steal_pct": 3.0} and stolen_runs == [{"n": 0, "steal_pct": 40.0}]
    assert attempts == [0, 1]
    attempts.clear()
    kept, stolen_runs = common.unstolen(measuring(90.0, 90.0, 90.0), 15, "x")
    assert attempts == [0, 1, 2] and kept["n"] == 2 and [r["n"] for r in stolen_runs] == [0, 1]  # then it counts
    attempts.clear()
    kept, stolen_runs = common.unstolen(measuring(90.0), None, "x")
    assert attempts == [0] and stolen_runs == []  # not asked: never again


def test_a_measure_of_its_own_processes_records_the_steal_over_it():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    def measure() -> dict:  # as long as the kernel takes to count a tick of machine time
        start = common.cpu_ticks()[1]
        deadline = time.monotonic() + 5
        while common.cpu_ticks()[1] == start and time.monotonic() < deadline:
            pass
        return {"p99_ms": 4.0}

    result = common.with_steal(measure)
    assert result["p99_ms"] == 4.0 and 0 <= result["steal_pct"] <= 100
