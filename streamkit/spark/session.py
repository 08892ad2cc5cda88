"""A SparkSession that can run streamkit jobs: the data source registered, Python workers on this
interpreter, and the app importable in them."""
from __future__ import annotations

import os
import sys
from typing import Any


def register(session: Any) -> None:
    from .source import StreamkitDataSource

    session.dataSource.register(StreamkitDataSource)


def _on_loopback(master: str) -> bool:
    """``spark://127.0.0.1:7077`` (or localhost): a standalone master on this machine's loopback."""
    from urllib.parse import urlsplit

    host = urlsplit(master).hostname or ""
    return master.startswith("spark://") and (host == "localhost" or host.startswith("127."))


def _forwardable(name: str) -> bool:
    """An environment variable a local task may see (not the driver's own gateway secrets)."""
    return name.isidentifier() and not name.startswith("PYSPARK_GATEWAY")


def spark_session(master: str = "local[2]", *, app_name: str = "streamkit", conf: dict[str, str] | None = None) -> Any:
    """Get or create the session. Local masters bind to 127.0.0.1 and serve no UI.

    Spark's Python workers must run this interpreter (``PYSPARK_PYTHON``) and find the app's
    module: the driver's import path is passed to them through ``PYTHONPATH``.
    """
    from pyspark.sql import SparkSession

    if master.startswith("local") or _on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver's JVM: no other address tried
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [os.getcwd()] + [p for p in sys.path if p and os.path.isdir(p)]
    existing = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths + [p for p in existing.split(os.pathsep) if p]))
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
               .config("spark.sql.shuffle.partitions", os.environ.get("STREAMKIT_SPARK_SHUFFLE_PARTITIONS", "4"))
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local") or _on_loopback(master):
        # a local session, or a cluster on this machine's loopback (tests): nothing listens elsewhere
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false"))
    if master.startswith("local"):
        # Spark's Python workers inherit the JVM's environment, taken when this process started its
        # first session: a later session (another app, a test module) would run its tasks with the
        # old one. Local workers run here, so they get this moment's environment explicitly.
        for key, value in os.environ.items():
            if _forwardable(key):
                builder = builder.config(f"spark.executorEnv.{key}", value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    register(session)
    return session
