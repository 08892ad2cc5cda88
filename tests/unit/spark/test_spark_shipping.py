"""What ``streamkit spark`` sends to a cluster's executors and how it reports their failures,
without a cluster (tests/spark/test_cluster.py runs them on one)."""
import sys
import zipfile

from click.testing import CliRunner

from streamkit.cli.main import cli
from streamkit.errors import ConfigurationError
from streamkit.spark.shipping import forwarded_environment, import_root, pack
from streamkit.spark.task_errors import one_line, task_failed


def test_a_module_of_a_namespace_package_ships_the_package_with_init_files(tmp_path, monkeypatch):
    (tmp_path / "shop" / "jobs").mkdir(parents=True)
    (tmp_path / "shop" / "jobs" / "orders.py").write_text("import streamkit as sk\napp = sk.App('x')\n")
    (tmp_path / "shop" / "data.json").write_text("{}")
    (tmp_path / "shop" / "__pycache__").mkdir()
    (tmp_path / "shop" / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    monkeypatch.syspath_prepend(str(tmp_path))
    root, target = import_root("shop.jobs.orders:app")
    assert (root, target) == (tmp_path, tmp_path / "shop")
    names = set(zipfile.ZipFile(pack(root, [target], tmp_path / "out.zip")).namelist())
    assert names == {"shop/jobs/orders.py", "shop/data.json", "shop/__init__.py", "shop/jobs/__init__.py"}
    try:  # what an executor does with it: the zip on its path, the folder not
        for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
            del sys.modules[name]
        monkeypatch.setattr(sys, "path", [str(tmp_path / "out.zip")] + [p for p in sys.path if p != str(tmp_path)])
        import shop.jobs.orders as shipped

        assert shipped.__file__.startswith(str(tmp_path / "out.zip"))
    finally:
        for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
            del sys.modules[name]


def test_a_single_module_app_ships_its_file(tmp_path, monkeypatch):
    (tmp_path / "lone_app.py").write_text("import streamkit as sk\napp = sk.App('lone')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert import_root("lone_app:app") == (tmp_path, tmp_path / "lone_app.py")
    finally:
        sys.modules.pop("lone_app", None)


def test_streamkit_settings_travel_to_executors_and_nothing_else(monkeypatch):
    monkeypatch.setenv("STREAMKIT_BROKER", "kafka://b:9092")
    monkeypatch.setenv("PAYMENTS_NAME", "p")
    forwarded = forwarded_environment()
    assert forwarded["spark.executorEnv.STREAMKIT_BROKER"] == "kafka://b:9092"
    assert not any("PAYMENTS_NAME" in key for key in forwarded)


def test_a_task_failure_is_found_in_sparks_text_as_one_line():
    failure = task_failed("flag", "orders[3]", ValueError("bad amount"))
    spark_text = (f"[STREAM_FAILED] Query terminated with exception: Job aborted ...\norg.apache.spark.api.python."
                  f"PythonException: Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                  f"streamkit.spark.task_errors.TaskFailed: {failure}\n\tat org.apache.spark.Foo(Foo.scala:1)\n")
    assert one_line(Exception(spark_text), "flag") == ("agent 'flag' on orders[3]: ValueError: bad amount", 1)
    config = task_failed("flag", "orders[3]", ConfigurationError("no such table"))
    assert one_line(Exception(str(config)), "flag")[1] == 2
    other = Exception("Job aborted\ncimpl.KafkaException: KafkaError{code=_INCONSISTENT}\n\tat x")
    assert one_line(other, "flag") == ("agent 'flag' failed on Spark: KafkaException: KafkaError{code=_INCONSISTENT}", 1)


def test_spark_connect_and_a_malformed_conf_are_refused_in_one_line():
    runner = CliRunner()
    done = runner.invoke(cli, ["spark", "-A", "examples.payments:app", "flag_large", "--checkpoint", "/tmp/x",
                               "--remote", "sc://127.0.0.1:15002"])
    assert done.exit_code == 2 and "Spark Connect is not supported" in done.output and "--master" in done.output
    done = runner.invoke(cli, ["spark", "-A", "examples.payments:app", "flag_large", "--checkpoint", "/tmp/x",
                               "--conf", "spark.executor.memory"])
    assert done.exit_code == 2 and "expected KEY=VALUE" in done.output


def test_two_apps_of_one_package_on_one_session_ship_the_package_once(tmp_path, monkeypatch):
    """Spark refuses a second file of the same name from another path ("already registered with a
    different path"): a second app of the package on the same session sends nothing new."""
    from pathlib import Path
    from types import SimpleNamespace

    from streamkit.spark.shipping import ship

    (tmp_path / "jobs").mkdir()
    for name in ("__init__", "a", "b"):
        (tmp_path / "jobs" / f"{name}.py").write_text("import streamkit as sk\napp = sk.App('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registered = {}

    def add_py_file(path):
        name = Path(path).name
        if registered.setdefault(name, path) != path:
            raise ValueError(f"File {name} was already registered with a different path")

    session = SimpleNamespace(sparkContext=SimpleNamespace(applicationId="app-1", addPyFile=add_py_file))
    try:
        assert ship(session, "jobs.a:app") == ["jobs"] and ship(session, "jobs.b:app") == ["jobs"]
    finally:
        for name in [m for m in sys.modules if m == "jobs" or m.startswith("jobs.")]:
            del sys.modules[name]
    assert list(registered) == ["jobs.zip"]
