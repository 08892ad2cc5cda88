"""A Spark standalone cluster on loopback for the tests: a master and two workers (1 core,
1 GiB each, separate executor JVMs), started with pyspark's own ``bin/spark-class`` and stopped
by pid. ``python -m tests.spark.cluster`` starts one and prints its master URL (Ctrl-C stops it).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from streamkit.devbroker import free_port


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as resp:
            state = json.load(resp)
    except OSError:
        return -1
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@contextmanager
def standalone_cluster(workers: int = 2, *, timeout: float = 90.0) -> Iterator[str]:
    """The master URL of a running cluster; everything started is stopped on exit."""
    port, ui_port = free_port(), free_port()
    work = Path(tempfile.mkdtemp(prefix="streamkit-spark-cluster-"))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(work / "local"),
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(work / "logs")}
    env.pop("PYTHONPATH", None)  # the executors must not see the driver's import path
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        log = open(work / f"{name}.log", "wb")
        procs.append(subprocess.Popen([str(spark_class()), *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      cwd=work, start_new_session=True))

    master = f"spark://127.0.0.1:{port}"
    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui_port))
        for n in range(workers):
            (work / f"worker-{n}").mkdir()
            start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                  "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work / f"worker-{n}"),
                  master)
        deadline = time.monotonic() + timeout
        while _alive_workers(ui_port) < workers:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"{f.name}:\n{f.read_text()[-2000:]}" for f in sorted(work.glob("*.log")))
                raise RuntimeError(
                    f"the Spark cluster did not come up ({'exited: ' + ', '.join(dead) if dead else 'timeout'})\n{logs}"
                )
            time.sleep(0.5)
        yield master
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


if __name__ == "__main__":
    with standalone_cluster() as url:
        print(url, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
