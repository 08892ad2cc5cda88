"""The apps in this directory are Faust apps: with ``import faust`` put back, each one loads under
faust-streaming 0.15.3 itself (every declaration, decorator and class option is Faust's)."""
import subprocess

import pytest

from tests.faust_apps.faust_env import APPS, as_faust_source, faust_python

APP_FILES = sorted(p for p in APPS.glob("*.py") if "import streamkit as faust\n" in p.read_text())


def test_the_suite_has_its_apps():
    assert {p.stem for p in APP_FILES} >= {"word_count", "withdrawals", "orders", "scheduling", "signals"}


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: p.stem)
def test_the_app_loads_under_faust(path, tmp_path):
    original = tmp_path / path.name
    original.write_text(as_faust_source(path))
    # the declarations run at import; "LOADED" proves the module body ran to its end under Faust
    check = f"import runpy; runpy.run_path({str(original)!r}, run_name='faust_app'); print('LOADED')"
    out = subprocess.run([str(faust_python()), "-c", check], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "LOADED" in out.stdout, out.stderr[-3000:]
