"""``@app.command`` as a Faust app declares it (``from faust.cli import option`` becomes
``from streamkit.cli import option``): ``python app.py <command>`` and ``streamkit -A app <command>``."""
from __future__ import annotations

import subprocess
import sys
import uuid

import orjson
import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli
from streamkit.transport.memory import MemoryBroker

SCRIPT = '''
import streamkit as faust
from streamkit.cli import option

app = faust.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False)
numbers = app.topic("numbers", value_type=int)


@app.command(option("--count", type=int, default=3, help="How many."), option("--start", type=int, default=0))
async def produce(self, count: int, start: int) -> None:
    """Send COUNT numbers."""
    for i in range(start, start + count):
        await numbers.send(value=i)
    self.say(f"sent {{count}}")


@app.command()
def fail(self) -> None:
    raise faust.ConfigurationError("a clear reason")


if __name__ == "__main__":
    app.main()
'''


@pytest.fixture
def script(tmp_path, monkeypatch):
    name = f"cmdapp_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(SCRIPT.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def test_streamkit_dash_a_app_runs_the_app_s_command_and_its_sends_arrive(script):
    result = CliRunner().invoke(cli, ["-A", f"{script}:app", "produce", "--count", "2", "--start", "5"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "sent 2"
    log = MemoryBroker.named(script).logs["numbers"]
    assert sorted(orjson.loads(m.value) for part in log for m in part) == [5, 6]
    helped = CliRunner().invoke(cli, ["-A", f"{script}:app", "produce", "--help"])
    assert "Send COUNT numbers." in helped.output and "--count INTEGER" in helped.output
    listed = CliRunner().invoke(cli, ["-A", f"{script}:app", "--help"])  # the app's commands among streamkit's
    assert listed.exit_code == 0 and "produce" in listed.output and "worker" in listed.output


def test_a_command_s_configuration_error_is_one_line(script):
    result = CliRunner().invoke(cli, ["-A", f"{script}:app", "fail"])
    assert result.exit_code == 2 and "streamkit: a clear reason" in result.output


def test_python_app_py_runs_the_command_through_app_main(script, tmp_path):
    out = subprocess.run([sys.executable, f"{script}.py", "produce", "--count", "4"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "sent 4"


def test_arguments_and_options_keep_the_order_they_are_declared_in():
    import streamkit as faust
    from streamkit.cli import argument, option

    name = f"cmdargs_{uuid.uuid4().hex[:6]}"
    app = faust.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False)

    @app.command(argument("location"), argument("name"), option("--first"), option("--second"))
    async def joining(self, location: str, name: str, first: str, second: str) -> None:
        self.say(f"{name} joined {location}")

    result = CliRunner().invoke(app.commands["joining"], ["oslo", "alice"])
    assert result.exit_code == 0 and result.output.strip() == "alice joined oslo", result.output
    helped = CliRunner().invoke(app.commands["joining"], ["--help"]).output
    assert "LOCATION NAME" in helped and helped.index("--first") < helped.index("--second")
