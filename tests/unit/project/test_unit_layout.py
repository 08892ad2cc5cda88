"""tests/unit/ mirrors the package: each test file sits in the directory of the streamkit
module or package it mainly tests (``project/`` holds checks of the repository itself), with
no ``__init__.py``, so test file basenames stay unique across tests/."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "tests" / "unit"


def test_each_unit_test_sits_in_the_directory_of_a_streamkit_module():
    package = ROOT / "streamkit"
    modules = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    misplaced = [str(p.relative_to(UNIT)) for p in UNIT.rglob("test_*.py")
                 if len(p.relative_to(UNIT).parts) != 2 or p.parent.name not in modules | {"project"}]
    assert misplaced == []


def test_no_init_files_and_unique_basenames():
    assert list(UNIT.rglob("__init__.py")) == []
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
