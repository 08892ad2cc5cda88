"""The import layers in pyproject.toml ([tool.importlinter]) hold: no module imports a higher layer."""
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[3]


def test_no_module_imports_a_higher_layer():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "layers KEPT" in out.stdout


def _contract() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]


def test_every_module_is_in_a_layer():
    """A module outside the list escapes the contract: each module is named or inside a named
    package. A package split over layers (streamkit/faust/) names its modules one by one."""
    layers = _contract()["contracts"][0]["layers"]
    named = {part.strip() for layer in layers for part in layer.replace(":", "|").split("|")}
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "streamkit").rglob("*.py")}

    def covered(module: str) -> bool:
        parts = module.split(".")
        return any(".".join(parts[:i]) in named for i in range(2, len(parts) + 1))

    split_packages = {m for m in modules if not covered(m) and any(o.startswith(m + ".") for o in modules)}
    assert sorted(m for m in modules - split_packages - {"streamkit"} if not covered(m)) == []


def test_type_only_imports_count():
    """An import under TYPE_CHECKING couples the layers as much as any other."""
    assert _contract()["exclude_type_checking_imports"] is False
