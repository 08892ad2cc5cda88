"""A Faust-style app's worker as its users start it: ``python app.py worker -l info``."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from streamkit.devbroker import free_port

APPS = Path(__file__).resolve().parent
ROOT = APPS.parents[1]


def app_env(broker: str, **extra: str) -> dict[str, str]:
    """The environment a deployment gives the app: Faust's BROKER_URL, nothing streamkit-specific."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    return {**env, "BROKER_URL": f"kafka://{broker}", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **extra}


def run_command(app: str, broker: str, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python app.py <command> ...`` to its end."""
    return subprocess.run([sys.executable, str(APPS / f"{app}.py"), *args], cwd=cwd, env=app_env(broker, **env),
                          capture_output=True, text=True, timeout=120)


class AppWorker:
    def __init__(self, app: str, broker: str, cwd: Path, *, script: Path | None = None,
                 python: str = sys.executable, **env: str) -> None:
        """``app``'s worker; ``script`` runs another copy of it, ``python`` another interpreter (Faust's)."""
        cwd.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [python, str(script or APPS / f"{app}.py"), "worker", "-l", "info", "--web-port", str(self.port)],
            cwd=cwd, env=app_env(broker, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def count(self, prefix: str) -> int:
        return sum(1 for line in list(self.lines) if line.startswith(prefix))

    def wait_for_line(self, prefix: str, *, times: int = 1, timeout: float = 60) -> list[str]:
        """The output lines starting with ``prefix`` once there are ``times`` of them; fails at the deadline."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [line for line in list(self.lines) if line.startswith(prefix)]
            if len(found) >= times:
                return found
            if self.process.poll() is not None:
                self._reader.join(5)
                raise AssertionError(f"worker exited {self.process.returncode} before {prefix!r}:\n"
                                     f"{self.output()[-4000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"no {times} line(s) {prefix!r} within {timeout}s:\n{self.output()[-4000:]}")

    def get(self, path: str) -> tuple[int | None, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, None
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None, None

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: the exit code (a worker that hangs on shutdown fails the test)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
                raise AssertionError(f"worker did not stop within {timeout}s:\n{self.output()[-3000:]}") from None
        self._reader.join(5)
        return self.process.returncode
