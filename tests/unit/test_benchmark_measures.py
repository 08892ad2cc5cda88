"""The benchmarks' peak RSS is each scenario process's own: ``ru_maxrss`` of a process started
by vfork (Python's subprocess) begins at its parent's peak, so every scenario reported at least
the orchestrator's (the 10M-key runs of both drivers printed the same 749 MB)."""
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


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
        import run
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert run.stolen({"steal_pct": 38.0}, 15)
    assert not run.stolen({"steal_pct": 4.0}, 15)
    assert not run.stolen({"steal_pct": 38.0}, None)  # not asked: every run counts, as before
    assert not run.stolen({"steal_pct": None}, 15)  # no /proc/stat: nothing to judge by
    assert not run.stolen({"steal_pct": 38.0, "error": "timeout"}, 15)  # a failure is reported, not retried
