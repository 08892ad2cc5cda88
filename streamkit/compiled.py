"""Which build of the per-record path runs: modules compiled by Cython at install, or the .py.

``STREAMKIT_COMPILE=1 pip install .`` (setup.py; off by default: compiled as they are, these
measured 0-10% faster, benchmarks/README.md) compiles the modules in :data:`MODULES` (plain Python,
the source of truth) into extension modules placed beside them, where Python's import system
prefers them to the .py. This module decides, once, before streamkit imports any of them:

- ``STREAMKIT_PURE_PYTHON=1`` makes every one of them import from its .py (tests run the
  fallback this way; a bug that shows only compiled can be bisected without a rebuild);
- a compiled module whose .py changed after the build (an editable install that was edited)
  is stale: its .py is imported instead, with one warning saying how to rebuild.

Standard library only: ``setup.py`` reads :data:`MODULES` and :data:`MANIFEST` from this file
without importing streamkit (whose dependencies a build environment lacks).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Sequence

# The per-record path, as profiled (benchmarks/README.md, "Compiled per-record path"): decode
# into Events, encode, produce, on both drivers. Not streams/stream.py and agents/agent.py (the
# hand-out, the agent's loop and emit): compiled, `async for` over a stream ran slower (Cython's
# async generators against CPython's: 0.92x the .py's records/s in same-run pairs, 23% more CPU).
MODULES: tuple[str, ...] = (
    "streamkit.runtime.decoding",
    "streamkit.runtime.event",
    "streamkit.runtime.inbox",
    "streamkit.topics",
    "streamkit.models.blessed",
    "streamkit.transport.partitioner",
    "streamkit.transport.confluent_fetched",
    "streamkit.transport.confluent_producer",
    "streamkit.transport.aiokafka_fetched",
    "streamkit.transport.aiokafka_batches",
)
PURE_ENV = "STREAMKIT_PURE_PYTHON"
# Written by setup.py beside the compiled modules: module name -> sha256 of the .py it compiled.
MANIFEST = "_compiled_sources.json"
_PACKAGE_DIR = Path(__file__).resolve().parent


def source_digest(path: Path) -> str:
    """The digest the manifest records for a module's .py (setup.py computes it the same way)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source_path(name: str) -> Path:
    return _PACKAGE_DIR.parent.joinpath(*name.split(".")).with_suffix(".py")


def _extension_path(name: str) -> Path | None:
    base = _PACKAGE_DIR.parent.joinpath(*name.split("."))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = base.with_name(base.name + suffix)
        if candidate.is_file():
            return candidate
    return None


def _forced_pure() -> bool:
    value = os.environ.get(PURE_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise ValueError(f"{PURE_ENV}={value!r}: set it to 1 to run the pure-Python modules, or unset it")


class _SourceFinder:
    """A meta-path finder that imports the named streamkit modules from their .py files,
    ahead of the path finder (which would pick the compiled module beside each)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        source = _source_path(fullname)
        loader = importlib.machinery.SourceFileLoader(fullname, str(source))
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


def _stale(compiled: list[str]) -> list[str]:
    """Compiled modules whose .py no longer matches what was compiled (or with no record of it)."""
    try:
        recorded = json.loads((_PACKAGE_DIR / MANIFEST).read_text())
    except (OSError, ValueError):
        recorded = {}
    return [name for name in compiled if recorded.get(name) != source_digest(_source_path(name))]


_state: dict[str, tuple[str, ...]] = {"compiled": ()}


def choose() -> None:
    """Pick the build for this process (streamkit/__init__.py calls it before importing the rest)."""
    if any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        return
    present = [name for name in MODULES if _extension_path(name) is not None]
    pure = list(MODULES) if _forced_pure() else [n for n in MODULES if n not in present] + _stale(present)
    if not _forced_pure() and len(pure) > len(MODULES) - len(present):
        stale = sorted(set(pure) & set(present))
        warnings.warn(f"streamkit: compiled {', '.join(stale)} older than the .py (edited since the build): running "
                      f"the .py instead; rebuild with `STREAMKIT_COMPILE=1 pip install -e .` (or set {PURE_ENV}=1)",
                      stacklevel=2)
    sys.meta_path.insert(0, _SourceFinder([n for n in pure if n in present]))
    _state["compiled"] = tuple(n for n in MODULES if n not in pure)


def compiled_modules() -> tuple[str, ...]:
    """The modules this process runs compiled (empty: the pure-Python build)."""
    return _state["compiled"]


def describe() -> str:
    """One line for ``streamkit --version``: which build of the per-record path runs."""
    compiled = compiled_modules()
    if not compiled:
        reason = f"{PURE_ENV} is set" if _forced_pure() else "not compiled at install: STREAMKIT_COMPILE=1 does"
        return f"per-record path: pure Python ({reason})"
    return f"per-record path: compiled ({len(compiled)} of {len(MODULES)} modules, Cython)"


if __name__ == "streamkit.compiled":  # imported by streamkit/__init__.py first (setup.py only reads MODULES)
    choose()
