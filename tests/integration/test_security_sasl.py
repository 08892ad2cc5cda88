"""On a SASL broker (``STREAMKIT_TEST_SASL_BROKER=host:port`` with user ``alice`` /
``alice-secret`` and PLAIN enabled; skipped elsewhere): good credentials work, bad ones and a
disabled mechanism fail at once with one line naming the cause, and no secret is printed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SASL = os.environ.get("STREAMKIT_TEST_SASL_BROKER")
pytestmark = pytest.mark.skipif(not SASL, reason="no SASL broker: set STREAMKIT_TEST_SASL_BROKER=host:port "
                                                  "(user alice/alice-secret, PLAIN)")

APP = '''
import os
import streamkit as sk
app = sk.App("sasl-test", broker=os.environ["SASL_BROKER"], sasl_mechanism=os.environ["MECH"],
             sasl_username="alice", sasl_password=os.environ["PW"], web_enabled=False)
'''


def run_cli(tmp_path, driver, mechanism, password, *args):
    (tmp_path / "saslapp.py").write_text(APP)
    env = {**os.environ, "SASL_BROKER": SASL or "", "MECH": mechanism, "PW": password, "STREAMKIT_DRIVER": driver}
    return subprocess.run([sys.executable, "-m", "streamkit", *args, "-A", "saslapp:app"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=15)  # a retry loop would take 20 s


@pytest.mark.parametrize("driver", ["aiokafka", "confluent"])
def test_good_credentials_connect(tmp_path, driver):
    out = run_cli(tmp_path, driver, "PLAIN", "alice-secret", "topics", "list")
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("driver", ["aiokafka", "confluent"])
@pytest.mark.parametrize("mechanism, password, cause", [
    ("PLAIN", "wrong-pw-123", "SASL authentication failed (user 'alice', mechanism PLAIN)"),
    ("SCRAM-SHA-512", "alice-secret", "the broker does not enable sasl_mechanism='SCRAM-SHA-512'"),
])
def test_misconfiguration_is_one_line_at_once(tmp_path, driver, mechanism, password, cause):
    out = run_cli(tmp_path, driver, mechanism, password, "worker", "--without-web")
    assert out.returncode == 2, out.stderr[-2000:]
    streamkit_lines = [line for line in out.stderr.splitlines() if line.startswith("streamkit:")]
    assert len(streamkit_lines) == 1 and cause in streamkit_lines[0], out.stderr[-2000:]
    assert password not in out.stdout + out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.splitlines()) < 20, "a flood of client log lines"
