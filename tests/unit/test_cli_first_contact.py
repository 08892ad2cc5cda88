"""What the CLI tells a user at first contact is what happened (or what the worker will do)."""
from __future__ import annotations

import sys
import uuid

import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli

APP_MODULE = '''
import streamkit as sk

app = sk.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False, topic_partitions=8)
orders = app.topic("{name}-orders", value_type=int)


@app.agent(orders)
async def handle(stream):
    async for _ in stream:
        pass
'''


@pytest.fixture
def app_module(tmp_path, monkeypatch):
    name = f"first_contact_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(APP_MODULE.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_send_to_an_agent_prints_the_topic_it_went_to(app_module):
    result = CliRunner().invoke(cli, ["send", "-A", f"{app_module}:app", "handle", "--value", "7", "--partition", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"sent to {app_module}-orders (agent handle) partition 2 offset 0", result.output


@pytest.mark.parametrize("spec, expected", [
    ("{name}.py:app", "-A {name}:app"),
    ("{name}.py", "-A {name}:app"),
    ("./{name}.py:app", "-A {name}:app"),
    ("sub/{name}.py:app", "-A {name}:app, run from sub"),
])
def test_a_file_path_for_dash_a_suggests_the_module_form(app_module, tmp_path, monkeypatch, spec, expected):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["agents", "-A", spec.format(name=app_module)])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert expected.format(name=app_module) in line and "\n" not in line, line
