"""docs/quickstart.md run as a user runs it: its files written, its commands run in one folder,
the outputs it shows checked. The README's first app must be the quickstart's."""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from streamkit.devbroker import free_port
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
BLOCK = re.compile(r"([^\n]*)\n\n```(\w+)\n(.*?)```", re.S)
SAVED_AS = re.compile(r"`([\w.-]+)`:$")
RECORD_LINE = re.compile(r"^(\S+)\s+\S+\s+(key=.*?)\s+(value=.*)$")


def steps(text):
    """(kind, payload) in the doc's order: ("file", (name, text)) for a block the line above it
    names (``... as `name`:``), ("run", line) per command line, ("output", text) for what the
    command before it prints."""
    found = []
    for before, lang, body in BLOCK.findall(text):
        saved = SAVED_AS.search(before.strip())
        if saved:
            found.append(("file", (saved.group(1), body)))
        elif lang == "bash":
            found.extend(("run", line.strip()) for line in body.splitlines() if line.strip())
        elif lang == "text":
            found.append(("output", body.strip()))
        else:
            raise AssertionError(f"a ```{lang} block the quickstart test does not know what to do with: {before!r}")
    return found


def python_block(text):
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def comparable(output):
    """Consume lines without their times (the rest is the same on every run), sorted: the two
    users' updates interleave as they come; anything else as it is."""
    lines = output.strip().splitlines()
    records = [RECORD_LINE.match(line) for line in lines]
    if lines and all(records):
        return sorted(" ".join(m.groups()) for m in records)
    return output.strip()


class Shell:
    """The doc's commands run one by one in ``cwd``, as one shell would: exports carry on,
    ``&`` lines run in the background (stopped by pid at the end)."""

    def __init__(self, cwd, ports):
        self.cwd = cwd
        self.ports = ports  # the doc's fixed ports -> free ones here
        bin_dir = Path(sys.executable).parent
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        for name in [n for n in self.env if n.startswith("STREAMKIT_")]:
            del self.env[name]  # the suite's settings are not a user's
        self.background = []  # (line, process, log path)
        self.last = None
        self.printed = None  # the address the dev broker printed

    def local(self, line):
        for doc_port, port in self.ports.items():
            line = line.replace(str(doc_port), str(port))
        return line

    def run(self, line):
        line = self.local(line)
        if line.startswith("export "):
            name, _, value = shlex.split(line)[1].partition("=")
            self.env[name] = value
            if name == "STREAMKIT_BROKER" and self.printed:
                assert value == self.printed, f"the dev broker printed {self.printed}, the doc exports {value}"
            return
        if line.startswith("curl ") and not shutil.which("curl"):
            url = next(a for a in shlex.split(line) if "://" in a or a.startswith("localhost"))
            with urllib.request.urlopen(url if "://" in url else f"http://{url}", timeout=30) as answer:
                self.last = answer.read().decode()
            return
        if line.endswith("&"):
            log = self.cwd / f"background-{len(self.background)}.log"
            with open(log, "w") as out:
                process = subprocess.Popen(["bash", "-c", "exec " + line[:-1]], cwd=self.cwd, env=self.env,
                                           stdout=out, stderr=subprocess.STDOUT)
            self.background.append((line, process, log))
            if " dev-broker" in line:  # the next line exports the address it prints first
                wait_until(lambda: self.first_line(process, log), 30, "the dev broker printed its address")
                self.printed = self.first_line(process, log)
            return
        try:
            done = subprocess.run(["bash", "-c", line], cwd=self.cwd, env=self.env, capture_output=True,
                                  text=True, timeout=60)
        except subprocess.TimeoutExpired as timeout:
            raise AssertionError(f"{line} did not finish in 60 s\n{self.logs()}") from timeout
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}\n{self.logs()}"
        self.last = done.stdout

    @staticmethod
    def first_line(process, log):
        assert process.poll() is None, f"the dev broker exited {process.returncode}: {log.read_text()}"
        text = log.read_text()
        return text.splitlines()[0] if "\n" in text else None

    def logs(self):
        return "\n".join(f"--- {line}\n{log.read_text()[-3000:]}" for line, _, log in self.background)

    def stop(self):
        """SIGTERM to each background process, the last started first; their exit codes."""
        codes = {}
        for line, process, _ in reversed(self.background):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                codes[line] = process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[line] = process.wait(10)
        return codes


def test_quickstart_runs_as_written(tmp_path):
    text = QUICKSTART.read_text()
    doc_steps = steps(text)
    runs = [payload for kind, payload in doc_steps if kind == "run"]
    broker_port = int(re.search(r"dev-broker --port (\d+)", runs[0]).group(1))
    web_port = int(re.search(r"--web-port (\d+)", text).group(1))
    assert runs[1] == f"export STREAMKIT_BROKER=127.0.0.1:{broker_port}", runs[1]
    shell = Shell(tmp_path, {broker_port: free_port(), web_port: free_port()})
    checked = 0
    try:
        for kind, payload in doc_steps:
            if kind == "file":
                (tmp_path / payload[0]).write_text(payload[1])
            elif kind == "run":
                shell.run(payload)
            else:
                assert comparable(shell.last) == comparable(shell.local(payload)), shell.logs()
                checked += 1
    finally:
        codes = shell.stop()
    assert checked == 3  # the consume and both queries
    assert (tmp_path / "orders_app.py").read_text() == python_block(text)
    assert all(code == 0 for code in codes.values()), f"{codes}\n{shell.logs()}"


def test_readme_opens_with_the_demo_and_the_tests():
    """The README's first block stays the two commands a newcomer runs first."""
    first = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    assert [line.split("#")[0].strip() for line in first.splitlines()] == ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_readme_first_app_is_the_quickstarts():
    readme = (ROOT / "README.md").read_text()
    first_app = readme.split("## A first app", 1)[1].split("\n## ", 1)[0]
    assert python_block(first_app) == python_block(QUICKSTART.read_text())
    assert "docs/quickstart.md" in first_app and "127.0.0.1:9092" not in first_app
