"""``python examples/payments.py seed N`` (docs/spark.md) goes through the app's own producer, so
the STREAMKIT_* broker and security settings apply, and says "sent" only once every payment was
acknowledged (issue 20: over SASL_SSL it printed success, exited 0 and delivered nothing)."""
from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker
from tests.unit.project.test_examples_and_timers import EXAMPLES, load_example


def test_seed_sends_every_payment_then_says_so(monkeypatch, tmp_path):
    ex = load_example("payments", monkeypatch, tmp_path)
    result = CliRunner().invoke(ex.app.commands["seed"], ["5", "--start", "3"])
    assert result.exit_code == 0 and result.stdout == "sent payments p3..p7\n", result.output
    broker = MemoryBroker.named(ex.app.conf.broker.split("://", 1)[1])
    assert sum(broker.end_offset(TP(ex.payments.name, p)) for p in range(4)) == 5


def test_seed_that_delivered_nothing_says_so_in_one_line(monkeypatch, tmp_path):
    ex = load_example("payments", monkeypatch, tmp_path)
    MemoryBroker.named(ex.app.conf.broker.split("://", 1)[1]).faults.fail_sends = 10**6
    result = CliRunner().invoke(ex.app.commands["seed"], ["4"])
    assert result.exit_code == 2 and "sent" not in result.stdout, result.output
    assert result.stderr.startswith("streamkit: 4 record(s) not delivered to payments")
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_seed_against_no_broker_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "STREAMKIT_BROKER": "127.0.0.1:1", "STREAMKIT_BROKER_CONNECT_TIMEOUT": "1",
           "PAYMENTS_NAME": "payments-unreachable"}
    out = subprocess.run([sys.executable, str(EXAMPLES / "payments.py"), "seed", "3"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and out.stdout == "", (out.stdout, out.stderr)
    assert out.stderr.splitlines() == [next(line for line in out.stderr.splitlines() if line.startswith("streamkit:"))]
    assert "cannot reach the Kafka broker at 127.0.0.1:1" in out.stderr
