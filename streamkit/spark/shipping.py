"""What a Spark cluster's executors need to run an app's agents, sent or checked before a query.

Executors import the app by ``module:attribute`` (spark/apps.py). On ``local[N]`` they share the
driver's machine and import path; on a cluster they have neither. So the app's own top-level
module or package (found from its import root) is zipped and sent with the job
(``SparkContext.addPyFile``), with any ``--py-files`` the user names, and a probe job then
imports streamkit and the app in the executors' Python: whatever is missing there is one line
naming it and how to ship it, before any query starts (not four retries of every task).
streamkit itself and its compiled dependencies cannot travel in a zip: they are installed on the
nodes, or sent as a packed environment (``spark.archives`` + ``spark.pyspark.python``).

An executor imports the app in its own environment: ``STREAMKIT_*`` settings are forwarded to
it (``spark.executorEnv``), and the probe compares what the executors' import declares (app id,
topics, tables) with the driver's, since an app that names its topics from another environment
variable would otherwise read and write other topics there, silently.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable

from ..errors import ConfigurationError

STREAMKIT_ON_EXECUTORS = (
    "install streamkit on every node (pip install 'streamkit[spark]' into the Python that "
    "spark.pyspark.python names), or send a packed environment: `venv-pack -o env.tar.gz`, then "
    "`streamkit spark ... --conf spark.archives=env.tar.gz#env --conf spark.pyspark.python=./env/bin/python` "
    "(docs/spark.md, Deploying)")

# The probe runs in the executors' Python before streamkit is known to import there, so it is
# pickled by value: compiled into a namespace no module of the driver is named after.
_PROBE_SOURCE = '''
def probe(index, rows):
    import socket
    where = socket.gethostname() + ":" + str(__import__("os").getpid())
    try:
        import streamkit.spark.apps as apps
    except BaseException as exc:
        return [(where, "streamkit", type(exc).__name__, str(exc), getattr(exc, "name", None))]
    try:
        __import__(MODULE)
    except BaseException as exc:
        return [(where, "app", type(exc).__name__, str(exc), getattr(exc, "name", None))]
    try:
        app = apps.load_app(SPEC)
    except BaseException as exc:
        return [(where, "app", type(exc).__name__, str(exc), None)]
    import streamkit.spark.shipping as shipping
    return [(where, None, None, None, shipping.declared(app))]
'''


def is_local(master: str) -> bool:
    return master.startswith("local")


def forwarded_environment() -> dict[str, str]:
    """The driver's ``STREAMKIT_*`` variables as executor environment settings: an executor's
    import of the app reads its settings from there, as the driver's did."""
    return {f"spark.executorEnv.{name}": value for name, value in os.environ.items() if name.startswith("STREAMKIT_")}


def declared(app: Any) -> dict[str, Any]:
    """What an import of the app declares, compared between the driver and the executors."""
    return {"app id": app.id, "topics": sorted(app.topics), "tables": sorted(app.tables)}


def import_root(spec: str) -> tuple[Path, Path]:
    """(the directory on the import path, the app's top-level module file or package directory)."""
    module_name = spec.partition(":")[0]
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        raise ConfigurationError(f"the app's module {module_name!r} has no file to send to the Spark executors; "
                                 "install it on every node instead")
    path = Path(file).resolve()
    depth = module_name.count(".") + (1 if path.name == "__init__.py" else 0)
    root = path.parents[depth]
    top = module_name.split(".")[0]
    target = root / top if (root / top).is_dir() else root / f"{top}.py"
    return root, target


def _walk(target: Path) -> Iterable[Path]:
    if target.is_file():
        yield target
        return
    for dirpath, dirnames, filenames in os.walk(target):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            if not name.startswith(".") and not name.endswith((".pyc", ".pyo")):
                yield Path(dirpath) / name


def pack(root: Path, targets: Iterable[Path], dest: Path) -> Path:
    """A zip of ``targets`` (files or package directories) with paths relative to ``root``. A
    directory without ``__init__.py`` (a namespace package) gets an empty one in the zip:
    Python's zip importer finds no namespace packages."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
        for target in targets:
            base = root if target.is_relative_to(root) else target.parent
            packages: set[Path] = set()
            for file in _walk(target):
                relative = file.relative_to(base)
                archive.write(file, relative)
                if file.suffix == ".py":
                    packages.update(relative.parents)
            for package in sorted(packages - {Path(".")}):
                if not (base / package / "__init__.py").exists():
                    archive.writestr(str(package / "__init__.py"), "")
    return dest


_SHIPPED: dict[str, set[Path]] = {}  # per Spark application: the app packages already sent


def ship(session: Any, spec: str, py_files: Iterable[str] = ()) -> list[str]:
    """Send the app's top-level module or package, and each of ``py_files`` (a .py file, a
    package directory, a .zip or .egg), to the executors; the names sent."""
    context = session.sparkContext
    root, target = import_root(spec)
    work = Path(tempfile.mkdtemp(prefix="streamkit-ship-"))
    sent = [target.name]
    shipped = _SHIPPED.setdefault(context.applicationId, set())
    if target not in shipped:  # a second app of the same package on one session: Spark has it
        context.addPyFile(str(pack(root, [target], work / f"{target.stem}.zip")))
        shipped.add(target)
    for item in py_files:
        path = Path(item).resolve()
        if not path.exists():
            raise ConfigurationError(f"--py-files {item!r}: no such file or directory")
        if path.suffix in (".zip", ".egg"):
            context.addPyFile(str(path))
        else:  # a module file or a package directory: zipped so it imports by its own name
            context.addPyFile(str(pack(path.parent, [path], work / f"extra-{path.stem}.zip")))
        sent.append(path.name)
    return sent


def check_executors(session: Any, spec: str, sent: list[str]) -> None:
    """Import streamkit and the app in the executors' Python (a task per core); one line
    naming what is missing and how to ship it, or nothing."""
    namespace: dict[str, Any] = {"__name__": "streamkit_executor_probe", "SPEC": spec,
                                 "MODULE": spec.partition(":")[0]}
    exec(compile(_PROBE_SOURCE, "<streamkit executor probe>", "exec"), namespace)
    context = session.sparkContext
    slots = max(1, context.defaultParallelism)
    answers = context.parallelize(range(slots), slots).mapPartitionsWithIndex(namespace["probe"]).collect()
    driver = declared(sys.modules[spec.partition(":")[0]].__dict__[spec.partition(":")[2] or "app"])
    for where, what, kind, message, missing in answers:
        if what is None:
            _same_app(spec, where, driver, missing)
            continue
        if what == "streamkit":
            raise ConfigurationError(f"streamkit cannot be imported on the Spark executors ({where}: {kind}: "
                                     f"{message}): {STREAMKIT_ON_EXECUTORS}")
        if missing:
            raise ConfigurationError(
                f"the app {spec!r} cannot be imported on the Spark executors: module {missing!r} is missing there "
                f"({where}); streamkit sent {', '.join(sent)}: send {missing!r} too with --py-files (a .py file, a "
                "package directory or a .zip), or install it on every node")
        raise ConfigurationError(f"the app {spec!r} fails to import on the Spark executors ({where}): "
                                 f"{kind}: {message}")


def _same_app(spec: str, where: str, driver: dict[str, Any], executor: dict[str, Any]) -> None:
    for what, here in driver.items():
        there = executor.get(what)
        if there != here:
            shown = (f"{there!r} there, {here!r} here" if what == "app id" else
                     f"{sorted(set(there or ()) ^ set(here))[:5]} differ")
            raise ConfigurationError(
                f"the app {spec!r} imported on the Spark executors ({where}) is not the driver's: its {what}: "
                f"{shown}. The app reads something at import that the executors' environment lacks (streamkit "
                "forwards STREAMKIT_* variables only): pass each other variable it reads with --conf "
                "spark.executorEnv.NAME=value")
