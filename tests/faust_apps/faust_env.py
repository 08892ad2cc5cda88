"""faust-streaming itself, in its own venv, to prove these apps are Faust apps and that streamkit
and Faust read each other's records."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".faust-venv"
PACKAGE = "faust-streaming==0.15.3"
APPS = Path(__file__).resolve().parent


def faust_python() -> Path:
    """The interpreter of a venv holding faust-streaming, created on first use (about 10 s)."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    if not (marker.exists() and marker.read_text() == PACKAGE):
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PACKAGE], check=True, timeout=600)
        marker.write_text(PACKAGE)
    return python


#: the only lines a Faust app changes to run on streamkit: the imports
IMPORTS = {"import streamkit as faust\n": "import faust\n",
           "from streamkit.cli import option\n": "from faust.cli import option\n",
           "from streamkit.cli import argument\n": "from faust.cli import argument\n",
           "from streamkit import ChannelT, StreamT\n": "from faust import ChannelT, StreamT\n"}


def as_faust_source(path: Path) -> str:
    """The app's source with its imports changed back, as it was written for Faust."""
    source = path.read_text()
    assert source.count("import streamkit as faust\n") == 1, f"{path.name} must import streamkit as faust, once"
    for ours, fausts in IMPORTS.items():
        source = source.replace(ours, fausts)
    assert "streamkit" not in source, f"{path.name} uses streamkit beyond its imports"
    return source
