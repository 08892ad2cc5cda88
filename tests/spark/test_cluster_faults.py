"""Exactly-once on a Spark cluster under faults: an executor JVM SIGKILLed mid-run, and the
driver SIGKILLed and started again from its checkpoint. The Faust-style pipeline's join output
holds each payment once and the totals' changelog ends at the exact sums (read_committed:
Apache Kafka; the dev broker lets aborted records through, so these are skipped there)."""
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import orjson
import pytest

from streamkit.testing.helpers import read_topic
from tests.spark.test_cluster import (
    ROOT,
    STREAMKIT,
    cluster,  # noqa: F401 - the module's cluster fixture
    latest_by_partition,
    pipeline_inputs,
    run,
)

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.requires("read_committed_hides_aborted")]


def expected_totals(count):
    """The sums the pipeline_inputs payments give per user (``u0`` also gets the four tails)."""
    totals = Counter()
    for i in range(count - 4):
        totals[f"u{i % 8}"] += float(i % 10)
    totals["u0"] += 4.0
    return dict(totals)


def start(name, cluster_url, checkpoint, agents):
    env = {**os.environ, "STREAMKIT_BROKER": os.environ["FAULTS_BROKER"], "PIPELINE_APP": name}
    env.pop("PYTHONPATH", None)
    command = [STREAMKIT, "spark", "-A", "tests.apps.spark_pipeline:app", *agents, "--checkpoint", str(checkpoint),
               "--available-now", "--max-offsets-per-trigger", "40", "--master", cluster_url,
               "--conf", f"spark.executorEnv.PIPELINE_APP={name}"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def committed_batches(checkpoint):
    commits = checkpoint / "commits"
    return len([f for f in commits.iterdir() if f.name.isdigit()]) if commits.exists() else 0


def wait_until(condition, timeout, what, proc):
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the query ended before {what}: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def check_exact(broker_address, name, count):
    enriched = read_topic(broker_address, f"{name}-enriched", timeout=60, to_end=True, isolation="read_committed")
    ids = Counter(orjson.loads(m.value())["id"] for m in enriched)
    assert len(ids) == count and set(ids.values()) == {1}, [k for k, v in ids.items() if v > 1][:10]
    changelog = read_topic(broker_address, f"{name}-totals-changelog", timeout=60, to_end=True,
                           isolation="read_committed")
    totals = {key.decode(): orjson.loads(value) for (_, key), value in latest_by_partition(changelog).items()}
    assert totals == pytest.approx(expected_totals(count))


@pytest.fixture
def pipeline(broker_address):
    name = f"pipe-f-{uuid.uuid4().hex[:6]}"
    os.environ["FAULTS_BROKER"] = f"kafka://{broker_address}"
    env = {**os.environ, "STREAMKIT_BROKER": f"kafka://{broker_address}", "PIPELINE_APP": name}
    env.pop("PYTHONPATH", None)
    created = run([sys.executable, "-c", "import asyncio\nfrom tests.apps.spark_pipeline import app\n"
                   "asyncio.run(app.ensure_topics())"], cwd=ROOT, env=env, timeout=60)
    assert created.returncode == 0, created.stderr[-2000:]
    return name, pipeline_inputs(broker_address, name)


def test_an_executor_killed_mid_run_changes_no_output(cluster, pipeline, broker_address, tmp_path):  # noqa: F811
    name, count = pipeline
    checkpoint = tmp_path / "ckpt"
    proc = start(name, cluster, checkpoint, ["keep_profiles", "enrich", "total_by_user"])
    try:
        enrich = checkpoint / "enrich"
        wait_until(lambda: enrich.exists() and committed_batches(enrich) >= 2, 240, "two enrich batches", proc)
        executors = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True)
        pids = [int(p) for p in executors.stdout.split()]
        assert pids, "no executor JVM found"
        os.kill(pids[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-2000:] + err[-4000:]
    check_exact(broker_address, name, count)


def test_a_driver_killed_mid_run_and_started_again_changes_no_output(cluster, pipeline, broker_address,  # noqa: F811
                                                                     tmp_path):
    name, count = pipeline
    checkpoint = tmp_path / "ckpt"
    proc = start(name, cluster, checkpoint, ["keep_profiles", "enrich", "total_by_user"])
    try:
        enrich = checkpoint / "enrich"
        wait_until(lambda: enrich.exists() and committed_batches(enrich) >= 2, 240, "two enrich batches", proc)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM: no clean stop of anything
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    again = start(name, cluster, checkpoint, ["keep_profiles", "enrich", "total_by_user"])
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, out[-2000:] + err[-4000:]
    check_exact(broker_address, name, count)
