"""Optionally compile the per-record path with Cython; the pure-Python package otherwise.

Off by default: compiled as plain Python (no annotations turned into C types, so the same
semantics as the .py), these modules measured 0-10% faster than the .py on CPython 3.11, under
what a build must pay (benchmarks/README.md, "Compiled per-record path").
``STREAMKIT_COMPILE=1 pip install .`` compiles every module named in
``streamkit/compiled.py`` (``MODULES``), ``STREAMKIT_COMPILE=<module>,<module>`` some of
them; a compilation that fails (no C compiler, no Python headers) installs the pure-Python
module and says so in one line.
"""
from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
_compiled = runpy.run_path(str(ROOT / "streamkit" / "compiled.py"))  # stdlib only: streamkit's deps may be absent
MODULES: tuple[str, ...] = _compiled["MODULES"]
MANIFEST: str = _compiled["MANIFEST"]
source_digest = _compiled["source_digest"]
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True}
SWITCH = "STREAMKIT_COMPILE"


def _say(message: str) -> None:
    print(f"streamkit: {message}", file=sys.stderr)


def _chosen() -> list[str]:
    """The modules ``STREAMKIT_COMPILE`` asks for (none when unset or 0)."""
    value = os.environ.get(SWITCH, "").strip()
    if value.lower() in ("", "0", "false", "no"):
        return []
    if value.lower() in ("1", "true", "yes", "all"):
        return list(MODULES)
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in MODULES]
    if unknown:
        raise SystemExit(f"{SWITCH}={value!r}: {', '.join(unknown)} not compilable; set 1 (all), 0 (none), or "
                         f"names from streamkit/compiled.py MODULES: {', '.join(MODULES)}")
    return names


class OptionalBuildExt(build_ext):
    """build_ext that leaves a module pure Python instead of failing the install, and records
    which source each compiled module was built from (streamkit/compiled.py checks it)."""

    def run(self) -> None:
        self._failed: set[str] = set()
        super().run()
        if self.extensions:
            self._write_manifest()

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the .py, said once
            _say(f"compiling {ext.name} failed ({type(exc).__name__}: {exc}); it stays pure Python")
            self._failed.add(ext.name)

    def _manifest_path(self) -> Path:
        first = self.extensions[0].name
        return Path(self.get_ext_fullpath(first)).parents[len(first.split(".")) - 2] / MANIFEST

    def _write_manifest(self) -> None:
        built = {ext.name: source_digest(ROOT.joinpath(*ext.name.split(".")).with_suffix(".py"))
                 for ext in self.extensions if ext.name not in self._failed}
        path = self._manifest_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")

    def get_outputs(self) -> list[str]:  # the manifest goes where the compiled modules go (wheel, editable)
        outputs: list[str] = super().get_outputs()
        return outputs + [str(self._manifest_path())] if self.extensions else outputs


def _extensions(names: list[str]) -> list[Any]:
    if not names:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # setup_requires below normally provides it
        _say("Cython is not installed: installing pure Python")
        return []
    sources = [str(Path(*name.split(".")).with_suffix(".py")) for name in names]
    try:
        extensions: list[Any] = cythonize(sources, compiler_directives=DIRECTIVES, quiet=True, build_dir="build/cython")
        return extensions
    except Exception as exc:  # noqa: BLE001
        _say(f"cythonize failed ({type(exc).__name__}: {exc}); installing pure Python")
        return []


CHOSEN = _chosen()
# setup_requires: pip asks the build backend for these, so only a compiling build fetches Cython
setup(ext_modules=_extensions(CHOSEN), cmdclass={"build_ext": OptionalBuildExt},
      setup_requires=["Cython>=3.1"] if CHOSEN else [])
