"""``streamkit reset``, ``clean-versions``, ``models`` and ``model`` on an app as Faust users write
it (a table, a group_by, Records), on the memory driver."""
from __future__ import annotations

import asyncio
import sys
import uuid

import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker

SCRIPT = '''
import streamkit as faust


class Click(faust.Record, namespace="web.Click"):
    """A page view."""
    user: str
    page: str
    weight: int = 1


app = faust.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False, data_dir={data!r},
                version={version})
clicks = app.topic("clicks", value_type=Click)
per_page = app.Table("per-page", default=int)


@app.agent(clicks)
async def count(stream):
    async for click in stream.group_by(Click.page):
        per_page[click.page] += click.weight
'''


@pytest.fixture
def app_module(tmp_path, monkeypatch):
    """A factory: the app module for a version, importable as ``<module>:app``."""
    name = f"state-{uuid.uuid4().hex[:6]}"
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(version=1):
        module = f"{name.replace('-', '_')}_v{version}"
        (tmp_path / f"{module}.py").write_text(SCRIPT.format(name=name, data=str(tmp_path / "data"), version=version))
        sys.modules.pop(module, None)
        __import__(module)
        return module, sys.modules[module].app

    yield make
    MemoryBroker.forget(name)


def run_a_while(app, clicks):
    async def go():
        async with app.running():
            for click in clicks:
                await app.send("clicks", key=click.user, value=click)
            # a new version's group reads the topic from the start: earlier versions' clicks too
            await wait_for(lambda: app.runtime.tables.ready and sum(app.tables["per-page"].values()) >= len(clicks),
                           10, message="every click counted")
    asyncio.run(go())


def test_reset_deletes_the_group_internal_topics_and_local_state_after_asking(app_module, tmp_path):
    module, app = app_module()
    Click = sys.modules[module].Click
    run_a_while(app, [Click("u1", "home"), Click("u2", "about")])
    broker = MemoryBroker.named(app.conf.broker.split("://", 1)[1])
    internal = {f"{app.id}-per-page-changelog", f"{app.id}-count-page-repartition"}
    assert internal <= set(broker.logs) and broker.committed.get(app.id)
    assert (tmp_path / "data" / app.id).is_dir()

    declined = CliRunner().invoke(cli, ["reset", "-A", f"{module}:app"], input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output
    assert internal <= set(broker.logs) and (tmp_path / "data" / app.id).is_dir()  # nothing deleted

    done = CliRunner().invoke(cli, ["reset", "-A", f"{module}:app"], input="y\n")
    assert done.exit_code == 0, done.output
    assert f"{app.id}-per-page-changelog" in done.output and "reset" in done.output
    assert not internal & set(broker.logs) and not broker.committed.get(app.id)
    assert "clicks" in broker.logs and sum(len(p) for p in broker.logs["clicks"]) == 2  # input stays
    assert not (tmp_path / "data" / app.id).exists()


def test_reset_refuses_while_a_worker_of_the_app_runs_here(app_module):
    module, app = app_module()

    async def go():
        async with app.running():
            result = await asyncio.to_thread(CliRunner().invoke, cli, ["reset", "-A", f"{module}:app", "--yes"])
            assert result.exit_code == 1 and "stop it first" in result.output, result.output
    asyncio.run(go())


def test_clean_versions_removes_the_other_versions_stores_only(app_module, tmp_path):
    module1, app1 = app_module(version=1)
    module3, app3 = app_module(version=3)
    Click = sys.modules[module1].Click
    run_a_while(app1, [Click("u1", "home")])
    run_a_while(app3, [Click("u1", "home")])
    assert (tmp_path / "data" / app1.id).is_dir() and (tmp_path / "data" / app3.id).is_dir()
    result = CliRunner().invoke(cli, ["clean-versions", "-A", f"{module3}:app"])
    assert result.exit_code == 0 and f"removed {app1.id}" in result.output, result.output
    assert not (tmp_path / "data" / app1.id).exists() and (tmp_path / "data" / app3.id).is_dir()


def test_models_and_model_list_the_records(app_module):
    module, _ = app_module()
    listed = CliRunner().invoke(cli, ["models", "-A", f"{module}:app"])
    assert listed.exit_code == 0 and "web.Click\tA page view." in listed.output.splitlines()
    shown = CliRunner().invoke(cli, ["model", "-A", f"{module}:app", "web.Click"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == ["web.Click", "  user: str", "  page: str", "  weight: int = 1"]
    missing = CliRunner().invoke(cli, ["model", "-A", f"{module}:app", "Nope"])
    assert missing.exit_code == 1 and "no Record 'Nope'" in missing.output and "web.Click" in missing.output
