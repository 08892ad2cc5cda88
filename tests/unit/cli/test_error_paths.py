"""Error paths users meet: one clear line naming the fix, never a traceback."""
from __future__ import annotations

import sys
import uuid

import pytest
from click.testing import CliRunner

import streamkit as sk
from streamkit.cli.main import cli
from streamkit.runtime.runner import serve
from streamkit.transport.memory import MemoryBroker

APP_MODULE = '''
import streamkit as sk

class Order(sk.Record):
    id: str
    amount: float

app = sk.App("cli-errors", broker="kafka://127.0.0.1:1", broker_connect_timeout=1.0)
orders = app.topic("orders", value_type=Order)
blobs = app.topic("blobs", value_type=bytes)
'''


@pytest.fixture
def app_module(tmp_path, monkeypatch):
    name = f"cli_errors_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(APP_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{name}:app"
    sys.modules.pop(name, None)


def invoke(*args):
    """The one line a misused command prints; it exits 2 (CLI misuse), without a traceback."""
    result = CliRunner().invoke(cli, list(args))
    assert isinstance(result.exception, SystemExit), f"not a clean exit: {result.exception!r}"  # a crash is kept here
    assert result.exit_code == 2, (result.exit_code, result.output)
    out = result.output.strip()
    assert "\n" not in out and "Traceback" not in out, out
    return out


@pytest.mark.parametrize("value, expected", [
    ('{"id": 1, "amount": 2}', "streamkit: value does not fit Order, the value type of 'orders': Order.id: expected string"),
    ('{"id": "1", "amount": "x"}', "Order.amount: expected float, got str 'x'"),
    ("not json", "streamkit: the value is not JSON"),
])
def test_send_refuses_a_value_before_connecting(app_module, value, expected):
    out = invoke("send", "-A", app_module, "orders", "--value", value)
    assert expected in out and "cannot reach" not in out, out


@pytest.mark.parametrize("topic, value, expected", [
    ("blobs", "42",
     "streamkit: value 42 cannot go to 'blobs' (raw values): raw codec needs bytes, got int; pass a JSON string"),
])
def test_send_of_a_value_a_bytes_or_str_topic_cannot_take_is_one_line(app_module, topic, value, expected):
    out = invoke("send", "-A", app_module, topic, "--value", value)
    assert expected in out and "cannot reach" not in out, out


def test_send_of_a_json_string_to_a_bytes_topic_sends_its_bytes(app_module):
    out = invoke("send", "-A", app_module, "blobs", "--value", '"hello"')
    assert "cannot reach the Kafka broker" in out  # the value passed; only the (absent) broker stopped it


@pytest.mark.parametrize("target, expected", [
    ("order", "did you mean 'orders'?"),
    ("nosuchtopc", "did you mean one of its topics (blobs, orders)?"),
])
def test_send_to_a_topic_the_app_does_not_declare_is_refused_before_connecting(app_module, target, expected):
    out = invoke("send", "-A", app_module, target, "--value", "1")
    assert f"{target!r} is neither a topic nor an agent of app 'cli-errors'" in out, out
    assert expected in out and "app.topic(" in out and "cannot reach" not in out, out


def test_topics_create_with_a_malformed_config_pair(app_module):
    out = invoke("topics", "create", "x", "--config", "retention.ms", "-A", app_module)
    assert out.endswith("--config takes key=value (e.g. retention.ms=86400000), got 'retention.ms'"), out


@pytest.mark.parametrize("spec, expected", [
    ("no_such_module_xyz:app", "cannot import 'no_such_module_xyz'"),
    ("streamkit:nothing_here", "is not a streamkit App"),
    (":app", "an app is named as module:attribute, not ':app'"),
])
@pytest.mark.parametrize("command", [["agents"], ["worker"], ["send", "orders", "--value", "1"]])
def test_a_bad_app_spec(spec, expected, command):
    assert expected in invoke(*command, "-A", spec)


def test_a_bad_app_spec_before_the_command(app_module):
    """Faust's order (``streamkit -A app worker``) reads the spec before the command."""
    assert "cannot import 'no_such_module_xyz'" in invoke("-A", "no_such_module_xyz:app", "agents")


async def test_an_existing_topic_with_another_partition_count_stops_the_worker_in_one_line(tmp_path, capsys):
    name = f"mismatch-{uuid.uuid4().hex[:6]}"
    MemoryBroker.named(name).create_topic("orders", 2)  # already there, made by someone else
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(tmp_path))
    orders = app.topic("orders", partitions=3)

    @app.agent(orders)
    async def handle(stream):
        async for _ in stream:
            pass

    assert await serve(app) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("streamkit: topic 'orders' exists with 2 partitions but is declared with 3; "
                   "change the declaration or recreate the topic"), err


MAIN_SCRIPT = '''
import streamkit as sk

app = sk.App("mainapp", broker="memory://mainapp", driver="memory")
words = app.topic("words")


@app.agent(words)
async def shout(stream):
    async for word in stream:
        print(word)


if __name__ == "__main__":
    app.main()
'''


def test_faust_command_forms_python_app_py_and_dash_a_first(tmp_path):
    """``python app.py agents`` through ``app.main()`` and ``streamkit -A app agents`` (Faust's order)."""
    import subprocess

    (tmp_path / "mainapp.py").write_text(MAIN_SCRIPT)
    for argv in ([sys.executable, "mainapp.py", "agents"],
                 [sys.executable, "-m", "streamkit", "-A", "mainapp:app", "agents"],
                 [sys.executable, "-m", "streamkit", "agents", "-A", "mainapp:app"]):
        out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (argv, out.stderr)
        assert out.stdout.startswith("shout\ttopic=words"), (argv, out.stdout)


@pytest.mark.parametrize("variable, value, line", [
    ("STREAMKIT_SECURITY_PROTOCOL", "TLS", "streamkit: security_protocol='TLS': expected one of PLAINTEXT, SSL, "
                                           "SASL_PLAINTEXT, SASL_SSL (any case) (did you mean 'SSL'?)"),
    ("STREAMKIT_SASL_MECHANISM", "GSSAPI", "streamkit: sasl_mechanism='GSSAPI' is not supported: use PLAIN, "
                                           "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"),
    ("STREAMKIT_SASL_PASSWORD_FILE", "/nonexistent/pw", "streamkit: sasl_password_file='/nonexistent/pw': "
                                                        "No such file or directory"),
])
def test_a_security_setting_the_settings_refuse_is_one_line_without_an_app(variable, value, line):
    """``streamkit topics list`` (no -A) builds its settings from STREAMKIT_*: it had a traceback."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "streamkit", "topics", "list", "--broker", "127.0.0.1:1"],
                         env={**os.environ, variable: value}, capture_output=True, text=True, timeout=30)
    assert (out.returncode, out.stderr.splitlines()) == (2, [line]), out.stderr
