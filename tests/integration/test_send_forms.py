"""``streamkit send`` in Faust's forms and from stdin, as a user runs it, on the dev broker."""
import os
import subprocess
import sys
from pathlib import Path

import orjson

from streamkit.testing import read_topic

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, env, input=None):
    return subprocess.run([sys.executable, "-m", "streamkit", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, input=input, env={**os.environ, "STREAMKIT_WEB_ENABLED": "false", **env})


def test_send_at_agent_and_json_lines_from_stdin(broker_address, unique):
    env = {"STREAMKIT_BROKER": broker_address, "PIPE_APP_ID": f"sendf-{unique}", "PIPE_IN": f"sendf-in-{unique}",
           "PIPE_OUT": f"sendf-out-{unique}", "PIPE_PARTITIONS": "2"}
    one = cli("send", "-A", "tests.apps.pipeline:app", "@copy", "41", "-k", "a", "--header", "trace=t1",
              "--timestamp", "1700000000.25", env=env)
    assert one.returncode == 0, one.stderr
    lines = "".join(orjson.dumps({"key": f"k{i}", "value": i, "headers": {"n": str(i)}, "partition": 1}).decode()
                    + "\n" for i in range(3))
    many = cli("send", "-A", "tests.apps.pipeline:app", f"sendf-in-{unique}", "--file", "-", env=env, input=lines)
    assert many.returncode == 0, many.stderr
    assert f"sent 3 records to sendf-in-{unique}: partition 1 offsets " in many.stdout, many.stdout
    records = read_topic(broker_address, f"sendf-in-{unique}", expect=4, timeout=20)
    first = [m for m in records if m.key() == b"a"]
    assert [(m.value(), m.headers(), m.timestamp()[1]) for m in first] == [(b"41", [("trace", b"t1")], 1700000000250)]
    rest = sorted((m for m in records if m.key() != b"a"), key=lambda m: m.offset())
    assert [(m.key(), orjson.loads(m.value()), m.partition(), m.headers()) for m in rest] == [
        (f"k{i}".encode(), i, 1, [("n", str(i).encode())]) for i in range(3)]
