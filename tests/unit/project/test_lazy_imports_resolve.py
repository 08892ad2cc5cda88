"""Every ``from streamkit... import name`` in the repository names something that exists, the
imports inside functions included (they run only when the function does: a fold on Spark once
imported a name a lint fix had removed, and failed only when its query started)."""
import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def streamkit_imports():
    for folder in ("streamkit", "examples", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                continue  # the benchmarks' peer venvs (benchmarks/.peers-venv): not the project's code
            package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    module = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                if module == "streamkit" or module.startswith("streamkit."):
                    yield path.relative_to(ROOT), module, [a.name for a in node.names if a.name != "*"]


def test_every_streamkit_import_in_the_repository_resolves():
    missing = []
    for path, module, names in streamkit_imports():
        try:
            found = importlib.import_module(module)
        except ImportError as exc:
            if "pyspark" in str(exc) or "pyarrow" in str(exc):  # the spark extra: not installed here
                continue
            missing.append(f"{path}: {module} ({exc})")
            continue
        for name in names:
            if not hasattr(found, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path}: from {module} import {name}")
    assert not missing, missing
