"""The compiled per-record path and its pure-Python fallback (setup.py, streamkit/compiled.py).

A copy of the package with one module compiled by setup.py (``STREAMKIT_COMPILE=<module>``,
the way an install compiles them) shows that the compiled module is what runs by default,
that STREAMKIT_PURE_PYTHON=1 really imports the .py, that a compiled module whose .py was edited
after the build is not run, and that ``streamkit --version`` says which build runs. Each probe is
a fresh interpreter: the choice is made once, when streamkit is first imported."""
from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streamkit
from streamkit.compiled import MODULES, PURE_ENV

ROOT = Path(streamkit.__file__).resolve().parent.parent
COMPILED = "streamkit.runtime.decoding"  # small: compiles in seconds
PROBE = ("import json, importlib, streamkit.compiled as c\n"
         "files = {n: importlib.import_module(n).__file__ for n in c.MODULES}\n"
         "print(json.dumps({'files': files, 'compiled': c.compiled_modules(), 'describe': c.describe()}))")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (PURE_ENV, "STREAMKIT_COMPILE", "PYTHONPATH")}
    return env | extra


def _copy(dest: Path) -> Path:
    """The package and setup.py, without any build products of the worktree."""
    shutil.copytree(ROOT / "streamkit", dest / "streamkit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "_compiled_sources.json"))
    shutil.copy(ROOT / "setup.py", dest / "setup.py")
    return dest


def _extension(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    found = [base.with_name(base.name + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    return next((p for p in found if p.is_file()), None)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    pytest.importorskip("Cython", reason="Cython (the dev extra) compiles the module")
    root = _copy(tmp_path_factory.mktemp("built"))
    result = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root,
                            capture_output=True, text=True, timeout=300, env=_clean_env(STREAMKIT_COMPILE=COMPILED))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _extension(root, COMPILED) is not None, result.stdout + result.stderr
    return root


def _probe(root: Path, pure: str | None = None) -> dict:
    env = _clean_env(PYTHONPATH=str(root), **({PURE_ENV: pure} if pure is not None else {}))
    result = subprocess.run([sys.executable, "-W", "always", "-c", PROBE], capture_output=True, text=True, env=env,
                            cwd=root, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) | {"stderr": result.stderr}


def _source(root: Path, name: str) -> str:
    return str(root.joinpath(*name.split(".")).with_suffix(".py"))


def test_by_default_the_compiled_module_runs(built):
    probe = _probe(built)
    assert probe["files"][COMPILED] == str(_extension(built, COMPILED))
    assert all(probe["files"][name] == _source(built, name) for name in MODULES if name != COMPILED)
    assert probe["compiled"] == [COMPILED]
    assert probe["describe"] == f"per-record path: compiled (1 of {len(MODULES)} modules, Cython)"


def test_the_pure_python_switch_imports_every_module_from_its_py(built):
    probe = _probe(built, pure="1")
    assert all(probe["files"][name] == _source(built, name) for name in MODULES)
    assert probe["compiled"] == []
    assert probe["describe"] == f"per-record path: pure Python ({PURE_ENV} is set)"


def test_a_compiled_module_whose_py_changed_since_the_build_is_not_run(built, tmp_path):
    """An editable install edited after its build: the edit runs (the .py), and a warning says so."""
    root = tmp_path / "edited"
    shutil.copytree(built, root, ignore=shutil.ignore_patterns("__pycache__", "build"))
    source = Path(_source(root, COMPILED))
    source.write_text(source.read_text() + "\nEDITED_AFTER_THE_BUILD = True\n")
    probe = _probe(root)
    assert probe["files"][COMPILED] == str(source)
    assert probe["compiled"] == []
    assert f"compiled {COMPILED} older than the .py (edited since the build)" in probe["stderr"]


def test_without_a_build_everything_is_pure_python(tmp_path):
    probe = _probe(_copy(tmp_path))
    assert all(probe["files"][name] == _source(tmp_path, name) for name in MODULES)
    assert probe["describe"] == "per-record path: pure Python (not compiled at install: STREAMKIT_COMPILE=1 does)"


def test_a_switch_value_that_is_neither_on_nor_off_is_refused():
    result = subprocess.run([sys.executable, "-c", "import streamkit"], capture_output=True, text=True,
                            env=_clean_env(PYTHONPATH=str(ROOT), **{PURE_ENV: "maybe"}), timeout=120)
    assert result.returncode != 0
    assert f"{PURE_ENV}='maybe': set it to 1 to run the pure-Python modules, or unset it" in result.stderr


def test_setup_refuses_a_module_it_does_not_compile(tmp_path):
    result = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=_copy(tmp_path),
                            capture_output=True, text=True, timeout=120,
                            env=_clean_env(STREAMKIT_COMPILE="streamkit.app"))
    assert result.returncode != 0
    assert "STREAMKIT_COMPILE='streamkit.app': streamkit.app not compilable" in result.stderr


def test_version_says_which_build_runs(built):
    result = subprocess.run([sys.executable, "-m", "streamkit", "--version"], capture_output=True, text=True,
                            cwd=built, env=_clean_env(PYTHONPATH=str(built)), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"per-record path: compiled (1 of {len(MODULES)} modules, Cython)"
