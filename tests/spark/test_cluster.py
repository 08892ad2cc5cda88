"""``streamkit spark --master spark://...`` on a real standalone cluster (a master and two workers
on loopback, separate executor JVMs that see neither the driver's import path nor its
environment): the app's package is sent to the executors, what they lack is one line at start,
and a failure inside a task is one line naming the agent, the topic partition and the exception."""
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest

from streamkit.testing.helpers import read_topic
from tests.spark.cluster import standalone_cluster
from tests.spark.test_guide import expected_payments
from tests.spark.test_spark import produce

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROOT = Path(__file__).resolve().parents[2]
STREAMKIT = str(Path(sys.executable).with_name("streamkit"))


@pytest.fixture(scope="module")
def cluster():
    with standalone_cluster(workers=2) as master:
        yield master


def run(argv, *, cwd, env, timeout=300):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def streamkit_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("streamkit:")]


def test_the_guides_backfill_runs_on_a_cluster_with_the_workers_results(cluster, broker_address, tmp_path):
    name = f"payments-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "STREAMKIT_BROKER": f"kafka://{broker_address}", "PAYMENTS_NAME": name}
    env.pop("PYTHONPATH", None)
    seeded = run([sys.executable, "examples/payments.py", "seed", "600"], cwd=ROOT, env=env, timeout=120)
    assert seeded.returncode == 0, seeded.stderr
    produce(broker_address, name, [], 4)  # a lone record a partition: exact ends on the dev broker too
    done = run([STREAMKIT, "spark", "-A", "examples.payments:app", "flag_large", "user_spend", "--checkpoint",
                str(tmp_path / "ckpt"), "--available-now", "--master", cluster,
                "--conf", f"spark.executorEnv.PAYMENTS_NAME={name}"], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "flag_large: 604 records" in done.stdout and "user_spend: 604 records" in done.stdout, done.stdout
    payments = expected_payments(600)
    large = read_topic(broker_address, f"{name}-large", timeout=60, to_end=True, isolation="read_uncommitted")
    ids = Counter(orjson.loads(m.value())["id"] for m in large)
    assert set(ids) == {pid for pid, (_, amount) in payments.items() if amount >= 1000}
    updates = read_topic(broker_address, f"{name}-spend", timeout=60, to_end=True, isolation="read_uncommitted")
    last = {}
    for m in sorted(updates, key=lambda m: (m.partition(), m.offset())):
        last[m.key().decode()] = orjson.loads(m.value())
    for user in {u for u, _ in payments.values()}:
        total = round(sum(a for u, a in payments.values() if u == user), 2)
        assert last[user]["total"] == pytest.approx(total) and last[user]["payments"] == 12, (user, last[user])


def test_an_app_env_the_executors_lack_is_one_line_at_start(cluster, broker_address, tmp_path):
    """The app names its topics from PAYMENTS_NAME: without it the executors' import is another app."""
    env = {**os.environ, "STREAMKIT_BROKER": f"kafka://{broker_address}", "PAYMENTS_NAME": "not-on-executors"}
    env.pop("PYTHONPATH", None)
    done = run([STREAMKIT, "spark", "-A", "examples.payments:app", "flag_large", "--checkpoint", str(tmp_path),
                "--available-now", "--master", cluster], cwd=ROOT, env=env)
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = streamkit_lines(done.stderr)
    assert "'payments' there, 'not-on-executors' here" in line and "spark.executorEnv.NAME=value" in line, line
    assert "Traceback" not in done.stderr


APP = '''
import os
import streamkit as sk
import shipping_helper

app = sk.App(os.environ["SHIP_APP"], topic_partitions=2)
source = app.topic(os.environ["SHIP_APP"], value_type=int)
out = app.topic(os.environ["SHIP_APP"] + "-out", value_type=int)


@app.agent(source, sink=[out])
def doubled(value: int) -> int:
    if value == 13:
        raise sk.ConfigurationError("thirteen is not allowed here")
    return shipping_helper.double(value)
'''


def test_a_module_missing_on_the_executors_is_one_line_and_py_files_sends_it(cluster, broker_address, tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "shipping_helper.py").write_text("def double(value):\n    return 2 * value\n")
    name = f"ship-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "STREAMKIT_BROKER": f"kafka://{broker_address}", "SHIP_APP": name,
           "STREAMKIT_ERROR_POLICY": "stop"}  # STREAMKIT_* travel to the executors by themselves
    env.pop("PYTHONPATH", None)
    command = [STREAMKIT, "spark", "-A", "app:app", "doubled", "--available-now", "--master", cluster,
               "--conf", f"spark.executorEnv.SHIP_APP={name}"]
    missing = run([*command, "--checkpoint", str(tmp_path / "c1")], cwd=tmp_path, env=env)
    assert missing.returncode == 2, missing.stderr[-3000:]
    [line] = streamkit_lines(missing.stderr)
    assert "module 'shipping_helper' is missing there" in line and "--py-files" in line, line
    assert "Traceback" not in missing.stderr

    produced = run([sys.executable, "-c", "import asyncio, app\n"
                    "async def main():\n"
                    "    for v in (1, 2, 3, 4): await app.source.send_and_wait(value=v, partition=v % 2)\n"
                    "    await app.app.flush(); await app.app.stop()\n"
                    "asyncio.run(main())"], cwd=tmp_path, env=env, timeout=120)
    assert produced.returncode == 0, produced.stderr[-2000:]
    shipped = run([*command, "--checkpoint", str(tmp_path / "c2"), "--py-files", "shipping_helper.py"],
                  cwd=tmp_path, env=env)
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    out = read_topic(broker_address, f"{name}-out", timeout=60, to_end=True, isolation="read_uncommitted")
    assert sorted(orjson.loads(m.value()) for m in out) == [2, 4, 6, 8]

    # a failure inside a task (error_policy=stop): the agent, the topic partition, the exception
    produced = run([sys.executable, "-c", "import asyncio, app\n"
                    "async def main():\n"
                    "    await app.source.send_and_wait(value=13, partition=1)\n"
                    "    await app.app.flush(); await app.app.stop()\n"
                    "asyncio.run(main())"], cwd=tmp_path, env=env, timeout=120)
    assert produced.returncode == 0, produced.stderr[-2000:]
    failed = run([*command, "--checkpoint", str(tmp_path / "c3"), "--py-files", "shipping_helper.py"],
                 cwd=tmp_path, env=env)
    assert failed.returncode in (1, 2), failed.stderr[-3000:]
    lines = streamkit_lines(failed.stderr)
    assert len(lines) == 1 and f"agent 'doubled' on {name}[1]" in lines[0], failed.stderr[-3000:]
    assert "thirteen is not allowed here" in lines[0], lines
