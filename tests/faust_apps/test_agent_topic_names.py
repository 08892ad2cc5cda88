"""An agent without a topic reads the topic Faust gives it, ``<app id>-<module>.<function>``, so
an existing Faust deployment's records reach the streamkit agent (it read ``<app id>-<function>``,
a topic nobody wrote to)."""
from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import streamkit
from tests.faust_apps.faust_env import IMPORTS, faust_python

APP = '''
{imports}

app = faust.App("{app_id}", broker="{broker}", driver="{driver}", web_enabled=False)


@app.agent(value_type=str)
async def tally(stream):
    async for word in stream:
        pass


@app.agent(name="renamed")
async def other(stream):
    async for word in stream:
        pass


if __name__ == "__main__":
    print(list(tally.get_topic_names()), list(other.get_topic_names()))
'''


def as_faust(source: str) -> str:
    return source.replace(', driver="memory"', "").replace(", web_enabled=False", "")


def write_app(directory: Path, module: str, app_id: str, broker: str = "memory://names", faust: bool = False) -> Path:
    ours, fausts = next(iter(IMPORTS.items()))  # the one line a Faust app changes
    source = APP.format(imports=(fausts if faust else ours).strip(), app_id=app_id,
                        broker="kafka://127.0.0.1:1" if faust else broker, driver="memory")
    path = directory / f"{module}.py"
    path.write_text(as_faust(source) if faust else source)
    return path


def topic_names(python: str, path: Path) -> str:
    """What the script prints run as ``python path`` (its module is ``__main__``)."""
    out = subprocess.run([python, str(path)], cwd=path.parent, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(Path(streamkit.__file__).parents[1]), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


@pytest.mark.parametrize("package", [False, True], ids=["script", "script-in-package"])
def test_an_agent_without_a_topic_reads_the_topic_faust_gives_it(tmp_path, package):
    directory = tmp_path / "pkg" if package else tmp_path
    directory.mkdir(exist_ok=True)
    if package:
        (directory / "__init__.py").write_text("")
    ours = topic_names(sys.executable, write_app(directory, "count_names", "names-app"))
    faust_dir = tmp_path / "faust"
    faust_dir.mkdir()
    fausts_dir = faust_dir / "pkg" if package else faust_dir
    fausts_dir.mkdir(exist_ok=True)
    if package:
        (fausts_dir / "__init__.py").write_text("")
    fausts = topic_names(str(faust_python()), write_app(fausts_dir, "count_names", "names-app", faust=True))
    prefix = "pkg." if package else ""
    assert fausts == f"['names-app-{prefix}count_names.tally'] ['names-app-renamed']", fausts
    assert ours == fausts


@pytest.fixture
def imported(tmp_path, monkeypatch):
    module = f"names_{uuid.uuid4().hex[:6]}"
    write_app(tmp_path, module, f"ids-{module}", broker=f"memory://{module}")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield module
    sys.modules.pop(module, None)


def test_imported_by_module_name_the_agent_topic_carries_the_module(imported):
    app = __import__(imported).app
    assert app.agents["tally"].topic.name == f"ids-{imported}-{imported}.tally"
    assert app.agents["renamed"].topic.name == f"ids-{imported}-renamed"  # a name= is the name, as in Faust


def test_a_worker_warns_when_the_old_agent_topic_holds_records(imported, caplog):
    """Before, the topic was ``<app id>-tally``: a deployment upgraded keeps its records there."""
    from streamkit.transport.memory import MemoryBroker

    app = __import__(imported).app
    old = f"ids-{imported}-tally"
    broker = MemoryBroker.named(imported)

    async def start() -> None:
        async with app.running():
            pass

    with caplog.at_level(logging.WARNING):
        asyncio.run(start())
    assert f"ids-{imported}-{imported}.tally" in broker.logs  # it started, and reads the new topic
    assert not [r for r in caplog.records if old in r.getMessage()]  # no old topic: no warning
    broker.create_topic(old, 1)
    with caplog.at_level(logging.WARNING):
        asyncio.run(start())
    assert not [r for r in caplog.records if old in r.getMessage()]  # empty: no warning
    broker.append(old, b"k", b'"left over"', None, [], None)
    with caplog.at_level(logging.WARNING):
        asyncio.run(start())
    warned = [r.getMessage() for r in caplog.records if old in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert f"ids-{imported}-{imported}.tally" in warned[0] and f"app.topic({old!r}" in warned[0], warned[0]
