"""The import layers in pyproject.toml ([tool.importlinter]) hold: no module imports a higher layer."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_no_module_imports_a_higher_layer():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "layers KEPT" in out.stdout
