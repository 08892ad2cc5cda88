"""Local start checks (the web port) come before the group: a refused worker rebalances no one."""
import datetime
import os
import subprocess
import sys
import time

from streamkit.devbroker import free_port
from tests.helpers import wait_until
from tests.integration.test_worker_processes import ROOT, create_topics, start_worker, workers  # noqa: F401


def assignment_times(log_path):
    """When the worker logged each of its assignments (its log's own timestamps)."""
    times = []
    for line in log_path.read_text().splitlines():
        if " streamkit.worker: assigned " in line:
            stamp = line[1:line.index("]")]
            times.append(datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f"))
    return times


def test_a_taken_web_port_exits_before_the_group_rebalances(broker_address, driver, unique, workers, tmp_path):  # noqa: F811 - the pytest fixture imported above
    create_topics(broker_address, unique)
    port = free_port()
    a_log = tmp_path / "a.log"
    workers.append(start_worker(broker_address, driver, unique, a_log, STREAMKIT_WEB_ENABLED="true",
                                STREAMKIT_WEB_PORT=str(port)))
    wait_until(lambda: assignment_times(a_log), 60, "worker A owns the input")
    settled = len(assignment_times(a_log))

    env = {**os.environ, "STREAMKIT_BROKER": broker_address, "STREAMKIT_DRIVER": driver, "PIPE_APP_ID": f"proc-{unique}",
           "PIPE_IN": f"proc-in-{unique}", "PIPE_OUT": f"proc-out-{unique}", "STREAMKIT_WEB_PORT": str(port)}
    began = time.monotonic()
    b = subprocess.run([sys.executable, "-m", "streamkit", "worker", "-A", "tests.apps.pipeline:app", "-l", "info"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - began
    lines = b.stderr.strip().splitlines()
    assert b.returncode == 2, b.stderr
    # -l info: a worker that reached the broker would have logged more than its refusal
    assert len(lines) == 1, b.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "--web-port" in lines[0] and "--without-web" in lines[0], lines[0]
    print(f"\n[{driver}] the refused worker exited in {took:.1f}s: {lines[0]}")

    # The positive marker: a worker that does join moves A's assignment, and A logs it. Every
    # assignment A logged since it settled must come from that join, none from B's start.
    joined_at = datetime.datetime.now()
    workers.append(start_worker(broker_address, driver, unique, tmp_path / "c.log"))
    wait_until(lambda: len(assignment_times(a_log)) > settled, 60, "A is rebalanced by a worker that joins")
    early = [t for t in assignment_times(a_log)[settled:] if t < joined_at]
    assert not early, f"A was rebalanced at {early} while the refused worker ran:\n{a_log.read_text()[-3000:]}"
