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


TABLES_MODULE = '''
import streamkit as sk

app = sk.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False, topic_partitions=8,
             store="memory://")
orders = app.topic("orders", key_type=str, value_type=int, partitions=4)
clicks = app.topic("clicks", key_type=str, value_type=int)  # its count: the broker's, or 8 if created
totals = app.Table("totals", default=int)
per_click = app.Table("per-click", default=int)
fixed = app.Table("fixed", default=int, partitions=4)


@app.agent(orders)
async def add(stream):
    async for event in stream.events():
        totals[event.key] += event.value
        fixed[event.key] += 1
'''


def tables_of(tmp_path, monkeypatch, declared: bool) -> dict[str, str]:
    name = f"tables_{uuid.uuid4().hex[:6]}"
    body = TABLES_MODULE.format(name=name)
    if not declared:  # the agent reads clicks (undeclared count) instead
        body = body.replace("@app.agent(orders)", "@app.agent(clicks)")
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = CliRunner().invoke(cli, ["tables", "-A", f"{name}:app"])
    finally:
        sys.modules.pop(name, None)
    assert result.exit_code == 0, result.output
    return {line.split("\t")[0]: line.split("\t")[2] for line in result.output.splitlines()}


def test_tables_says_the_partitions_the_worker_settles_on(tmp_path, monkeypatch):
    """totals and per-click take the count of the source (orders: 4), not topic_partitions (8)."""
    listed = tables_of(tmp_path, monkeypatch, declared=True)
    assert listed == {"totals": "partitions=4", "per-click": "partitions=4", "fixed": "partitions=4"}, listed


def test_tables_says_when_the_count_is_the_broker_s(tmp_path, monkeypatch):
    listed = tables_of(tmp_path, monkeypatch, declared=False)
    decided = "partitions=decided at start from topic clicks (its count on the broker; 8 if the worker creates it)"
    assert listed == {"totals": decided, "per-click": decided, "fixed": "partitions=4"}, listed
