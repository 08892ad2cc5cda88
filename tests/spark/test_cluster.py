"""``streamkit spark --master spark://...`` on a real standalone cluster (a master and two workers
on loopback, separate executor JVMs that see neither the driver's import path nor its
environment): the app's package is sent to the executors, what they lack is one line at start,
and a failure inside a task is one line naming the agent, the topic partition and the exception."""
import os
import subprocess
import sys
import time
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


def latest(messages) -> dict[str, float]:
    """A changelog's latest value per key (checkpoint marks left out)."""
    from streamkit.tables.marks import MARK_KEY

    out = {}
    for m in sorted(messages, key=lambda m: (m.partition(), m.offset())):
        if m.key() != MARK_KEY:
            out[m.key().decode()] = None if m.value() is None else orjson.loads(m.value())
    return out


def send_payments(broker_address, topic, start, count):
    """Payments keyed by id, then a lone record a partition (exact ends on the dev broker too)."""
    records = [(f"pay{i}".encode(), orjson.dumps({"id": f"pay{i}", "user": f"user{i % 7}", "amount": float(i % 10)}))
               for i in range(start, start + count)]
    produce(broker_address, topic, records, 0)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker_address})
    for p in range(4):
        producer.produce(topic, key=f"tail{start}-{p}".encode(), partition=p,
                         value=orjson.dumps({"id": f"tail{start}-{p}", "user": "tail", "amount": 1.0}))
        producer.flush(30)


def test_a_faust_style_table_agent_runs_on_the_cluster_and_a_worker_continues(cluster, broker_address, tmp_path):
    name = f"keyed-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "STREAMKIT_BROKER": f"kafka://{broker_address}", "KEYED_APP": name}
    env.pop("PYTHONPATH", None)
    created = run([sys.executable, "-c", "import asyncio\nfrom tests.apps.spark_keyed import app\n"
                   "asyncio.run(app.ensure_topics())"], cwd=ROOT, env=env, timeout=60)
    assert created.returncode == 0, created.stderr[-2000:]
    send_payments(broker_address, f"{name}-payments", 0, 400)
    done = run([STREAMKIT, "spark", "-A", "tests.apps.spark_keyed:app", "total_by_user", "--checkpoint",
                str(tmp_path / "ckpt"), "--available-now", "--master", cluster,
                "--conf", f"spark.executorEnv.KEYED_APP={name}"], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "total_by_user: 404 records" in done.stdout, done.stdout
    expected = {f"user{u}": float(sum(i % 10 for i in range(400) if i % 7 == u)) for u in range(7)}
    changelog = f"{name}-totals-changelog"
    on_spark = latest(read_topic(broker_address, changelog, timeout=60, to_end=True, isolation="read_uncommitted"))
    assert on_spark == {**expected, "tail": 4.0}, on_spark

    # a worker joins the group at the offsets Spark committed and starts from Spark's totals
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen([STREAMKIT, "worker", "-A", "tests.apps.spark_keyed:app", "-l", "info"], cwd=ROOT,
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        send_payments(broker_address, f"{name}-payments", 400, 100)
        expected = {f"user{u}": float(sum(i % 10 for i in range(500) if i % 7 == u)) for u in range(7)}
        want = {**expected, "tail": 8.0}
        deadline = time.monotonic() + 120
        while (got := latest(read_topic(broker_address, changelog, timeout=30, to_end=True,
                                        isolation="read_uncommitted"))) != want:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (got, want, (tmp_path / "worker.log").read_text()[-3000:])
            time.sleep(1)
    finally:
        worker.terminate()
        worker.wait(60)


# An hour ago, on a whole minute: Kafka deletes records older than the topic's retention (7 days
# by default) by their timestamps, so a fixed date in the past empties the input under the test.
T0 = (int(time.time() * 1000) // 60_000 - 60) * 60_000


def pipeline_inputs(broker_address, name, *, users=True, payments=True):
    """Users (u7 has no profile: a left join's None) and payments 0.5 s apart, keyed by id; then a
    lone payment a partition (exact ends on the dev broker too). Returns the payments' count."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker_address, "partitioner": "murmur2_random"})
    for u in range(7 if users else 0):
        producer.produce(f"{name}-users", key=f"u{u}".encode(), value=orjson.dumps({"id": f"u{u}", "country": f"c{u % 3}"}))
        producer.flush(30)  # one batch each: the dev broker's end offsets are exact then
    pays = [(f"pay{i}", f"u{i % 8}", float(i % 10), T0 + i * 500 - (20_000 if i % 17 == 16 else 0))
            for i in range(300)]
    pays += [(f"tail{p}", "u0", 1.0, T0 + 300 * 500) for p in range(4)]
    for i, (pid, user, amount, at) in enumerate(pays if payments else ()):
        producer.produce(f"{name}-payments", key=pid.encode(), timestamp=at, partition=i - 300 if i >= 300 else -1,
                         value=orjson.dumps({"id": pid, "user": user, "amount": amount}))
        if i >= 299:
            producer.flush(30)
    return len(pays)


def run_pipeline_worker(broker_address, name, count):
    """The pipeline on a worker (in this process): profiles first, then the payments, until every
    agent committed everything."""
    import asyncio
    import importlib

    from streamkit.testing.helpers import wait_for

    os.environ["PIPELINE_APP"] = name
    os.environ["STREAMKIT_BROKER"] = f"kafka://{broker_address}"
    try:
        module = importlib.reload(importlib.import_module("tests.apps.spark_pipeline"))
    finally:
        del os.environ["PIPELINE_APP"], os.environ["STREAMKIT_BROKER"]
    app = module.app

    def committed(prefix):
        return sum(o for tp, o in app.runtime.checkpoint.committed.items() if tp.topic.startswith(prefix))

    async def go():
        await app.ensure_topics()
        async with app.running():
            await asyncio.to_thread(pipeline_inputs, broker_address, name, payments=False)
            await wait_for(lambda: committed(f"{name}-users") >= 7, 60, message="profiles loaded")
            assert await asyncio.to_thread(pipeline_inputs, broker_address, name, users=False) == count
            await wait_for(lambda: min(committed(f"{name}-payments"), committed(f"{name}-total_by_user"),  # repartitions
                                       committed(f"{name}-enrich")) >= count, 90, message="payments processed")
    asyncio.run(go())


def test_the_faust_style_pipeline_on_the_cluster_equals_the_worker(cluster, broker_address, tmp_path):
    """Profiles in a table, totals after group_by, a tumbling count with .final() and a
    stream-table join, via ``streamkit spark --master spark://...``: outputs, finals and
    changelogs equal the worker's on the same input."""
    on_spark, on_worker = f"pipe-s-{uuid.uuid4().hex[:6]}", f"pipe-w-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "STREAMKIT_BROKER": f"kafka://{broker_address}", "PIPELINE_APP": on_spark}
    env.pop("PYTHONPATH", None)
    created = run([sys.executable, "-c", "import asyncio\nfrom tests.apps.spark_pipeline import app\n"
                   "asyncio.run(app.ensure_topics())"], cwd=ROOT, env=env, timeout=60)
    assert created.returncode == 0, created.stderr[-2000:]
    count = pipeline_inputs(broker_address, on_spark)
    done = run([STREAMKIT, "spark", "-A", "tests.apps.spark_pipeline:app", "keep_profiles", "total_by_user",
                "count_per_minute", "enrich", "--checkpoint", str(tmp_path / "ckpt"), "--available-now",
                "--master", cluster, "--conf", f"spark.executorEnv.PIPELINE_APP={on_spark}"], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert f"enrich: {count + 7} records" in done.stdout, done.stdout  # the payments and the profiles' changes
    run_pipeline_worker(broker_address, on_worker, count)

    def records(name, topic, changelog=False):
        found = read_topic(broker_address, f"{name}-{topic}", timeout=60, to_end=True, isolation="read_uncommitted")
        if changelog:
            return latest_by_partition(found)
        return Counter((m.partition(), m.key(), m.value()) for m in found)

    enriched = records(on_spark, "enriched")
    assert sum(enriched.values()) == count and any(b'"country":null' in v for _, _, v in enriched)
    assert enriched == records(on_worker, "enriched")
    finals = records(on_spark, "minutes")
    assert finals and finals == records(on_worker, "minutes")
    for table in ("profiles", "totals", "per_minute"):
        state = records(on_spark, f"{table}-changelog", changelog=True)
        assert state and state == records(on_worker, f"{table}-changelog", changelog=True), table


def latest_by_partition(messages):
    from streamkit.tables.marks import MARK_KEY

    out = {}
    for m in sorted(messages, key=lambda m: (m.partition(), m.offset())):
        if m.key() != MARK_KEY:
            out[(m.partition(), m.key())] = m.value()
    return {k: v for k, v in out.items() if v is not None}
