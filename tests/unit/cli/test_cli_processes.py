"""``streamkit worker --processes N``: the value refused in one line, the members' ports and data
dirs, ``--processes 1`` as today, and the supervisor's signals, log prefixes and exit codes
(over stand-in children: no broker here; tests/integration/test_worker_supervisor.py runs workers)."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def app_spec(tmp_path, monkeypatch, request):
    """A fresh app module per test (the CLI sets options on the app's conf: no sharing)."""
    name = f"sup_app_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("import streamkit as sk\napp = sk.App('sup-app')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:app"


def one_line_refusal(result, *words):
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("given", ["0", "-1", "two", "1.5", ""])
def test_a_bad_count_is_one_line_and_exit_2(given, app_spec):
    result = CliRunner().invoke(cli, ["worker", "-A", app_spec, "--processes", given])
    line = one_line_refusal(result, "--processes", "auto")
    assert repr(given) in line


def test_one_process_runs_the_worker_in_this_process(app_spec, monkeypatch):
    ran = []
    monkeypatch.setattr("streamkit.runtime.runner.run_worker", lambda app: ran.append(app) or 0)
    monkeypatch.setattr("streamkit.cli.supervisor.supervise",
                        lambda *a, **k: pytest.fail("--processes 1 started a supervisor"))
    result = CliRunner().invoke(cli, ["worker", "-A", app_spec, "--processes", "1", "--web-port", "7001"])
    assert result.exit_code == 0, result.output
    assert len(ran) == 1 and ran[0].conf.web_port == 7001 and ran[0].conf.data_dir == "streamkit-data"


def planned(monkeypatch, app_spec, *args):
    """The members ``worker --processes`` would start (supervise is stood in for)."""
    seen = {}

    def fake(members, stop_timeout):
        seen["members"] = members
        return 0

    monkeypatch.setattr("streamkit.cli.supervisor.supervise", fake)
    result = CliRunner().invoke(cli, ["worker", "-A", app_spec, *args])
    assert result.exit_code == 0, result.output
    return seen["members"]


def test_members_get_consecutive_ports_and_their_own_data_dirs(app_spec, monkeypatch):
    members = planned(monkeypatch, app_spec, "--processes", "3", "--web-port", "7100", "--data-dir", "/x/data")
    assert [m.name for m in members] == ["w1", "w2", "w3"]
    assert [m.web_port for m in members] == [7100, 7101, 7102]
    assert [m.data_dir for m in members] == ["/x/data/w1", "/x/data/w2", "/x/data/w3"]
    argv = members[1].argv
    assert argv[:3] == [sys.executable, "-m", "streamkit"] and "--processes" not in argv
    assert argv[argv.index("--web-port") + 1] == "7101" and argv[argv.index("--data-dir") + 1] == "/x/data/w2"
    assert argv[argv.index("-A") + 1] == app_spec


def test_without_web_the_members_serve_no_port(app_spec, monkeypatch):
    members = planned(monkeypatch, app_spec, "--processes", "2", "--without-web")
    assert [m.web_port for m in members] == [None, None]
    assert all("--without-web" in m.argv and "--web-port" not in m.argv for m in members)


def test_auto_is_the_cores_this_process_may_use(app_spec, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert len(planned(monkeypatch, app_spec, "--processes", "auto")) == 3


def test_ports_past_65535_are_refused(app_spec):
    result = CliRunner().invoke(cli, ["worker", "-A", app_spec, "--processes", "2", "--web-port", "65535"])
    one_line_refusal(result, "65535", "--web-port")


@pytest.mark.parametrize("variable", ["STREAMKIT_WEB_ADVERTISED_URL", "STREAMKIT_TRANSACTIONAL_ID"])
def test_a_setting_only_one_member_can_hold_is_refused(variable, tmp_path, monkeypatch, request):
    monkeypatch.setenv(variable, "http://127.0.0.1:9999" if "URL" in variable else "tx-1")
    name = f"sup_app_one_{variable.lower()}"
    (tmp_path / f"{name}.py").write_text("import streamkit as sk\napp = sk.App('sup-app')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(cli, ["worker", "-A", f"{name}:app", "--processes", "2"])
    one_line_refusal(result, variable.removeprefix("STREAMKIT_").lower(), "--processes")


def test_a_static_group_member_is_refused(tmp_path, monkeypatch):
    (tmp_path / "sup_app_static.py").write_text(
        "import streamkit as sk\napp = sk.App('sup-app', driver='confluent', "
        "consumer_config={'group.instance.id': 'one'})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(cli, ["worker", "-A", "sup_app_static:app", "--processes", "2"])
    one_line_refusal(result, "group.instance.id", "--processes 2")


# The supervisor over stand-in children: each prints a line, then waits for SIGTERM (exit 0) or
# exits by itself with CHILD_EXIT after CHILD_AFTER seconds.
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGUSR1, lambda *a: print("dumping", flush=True))
    print("hello from", os.getpid(), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    deadline = time.monotonic() + float(os.environ.get("CHILD_AFTER", "60"))
    while not stop and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(0 if stop else int(os.environ.get("CHILD_EXIT", "0")))
""")


def start_supervisor(tmp_path, children, stop_timeout=5):
    """``supervise`` in a process of its own, over ``children``: (name, extra env) pairs."""
    (tmp_path / "child.py").write_text(CHILD)
    members = ", ".join(
        f"Member({name!r}, ['env', *{[f'{k}={v}' for k, v in env.items()]!r}, sys.executable, "
        f"{str(tmp_path / 'child.py')!r}], None, '')" for name, env in children)
    code = (f"import sys\nfrom streamkit.cli.supervisor import Member, supervise\n"
            f"sys.exit(supervise([{members}], {stop_timeout}))\n")
    log = tmp_path / "supervisor.log"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=open(log, "wb"),
                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return process, log


def member_pids(log, count):
    """The pids the supervisor names as it starts its members."""
    lines = [line for line in log.read_text().splitlines() if "started member" in line]
    if len(lines) < count:
        return None
    return [int(line.split("pid ")[1].split()[0].rstrip(",)")) for line in lines]


def alive(pid):
    """The process runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_sigterm_stops_every_member_and_exits_0(tmp_path):
    process, log = start_supervisor(tmp_path, [("w1", {}), ("w2", {})])
    try:
        pids = wait_until(lambda: member_pids(log, 2), 20, "both members started")
        wait_until(lambda: log.read_text().count("hello from") == 2, 20, "both members' first lines")
        assert all(alive(pid) for pid in pids)
        text = log.read_text()
        for name, pid in zip(("w1", "w2"), pids, strict=True):
            assert f"[{name}] hello from {pid}" in text and f"[{name}] to stderr" in text, text
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0, log.read_text()
        assert not [pid for pid in pids if alive(pid)], "a member outlived its supervisor"
    finally:
        process.kill()


def test_sigusr1_reaches_every_member_and_stops_nothing(tmp_path):
    """``kill -USR1 <supervisor>`` dumps each member's tasks, as it does a single worker's."""
    process, log = start_supervisor(tmp_path, [("w1", {}), ("w2", {})])
    try:
        wait_until(lambda: member_pids(log, 2), 20, "both members started")
        wait_until(lambda: log.read_text().count("hello from") == 2, 20, "both members' first lines")
        process.send_signal(signal.SIGUSR1)
        wait_until(lambda: "[w1] dumping" in log.read_text() and "[w2] dumping" in log.read_text(), 20,
                   "both members dumped")
        assert process.poll() is None, log.read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0, log.read_text()
    finally:
        process.kill()


@pytest.mark.parametrize("own, supervisor", [(3, 3), (0, 1)])  # stopping unasked with 0 is a failure too
def test_a_member_that_dies_stops_the_others_and_names_itself(tmp_path, own, supervisor):
    process, log = start_supervisor(tmp_path, [("w1", {}), ("w2", {"CHILD_AFTER": "1", "CHILD_EXIT": own})])
    try:
        pids = wait_until(lambda: member_pids(log, 2), 20, "both members started")
        assert process.wait(30) == supervisor, log.read_text()
        text = log.read_text()
        failed = [line for line in text.splitlines() if "member w2" in line and f"exited with code {own}" in line]
        assert len(failed) == 1, text
        assert "stopping the other members" in failed[0]
        assert not alive(pids[0]), "w1 still runs after w2 failed"
    finally:
        process.kill()


def test_a_member_killed_by_a_signal_exits_128_plus_the_signal(tmp_path):
    process, log = start_supervisor(tmp_path, [("w1", {}), ("w2", {})])
    try:
        pids = wait_until(lambda: member_pids(log, 2), 20, "both members started")
        os.kill(pids[0], signal.SIGKILL)
        assert process.wait(30) == 128 + signal.SIGKILL, log.read_text()
        text = log.read_text()
        assert "member w1" in text and "SIGKILL" in text, text
        assert not alive(pids[1])
    finally:
        process.kill()


def test_members_get_sigterm_when_the_supervisor_is_killed(tmp_path):
    process, log = start_supervisor(tmp_path, [("w1", {}), ("w2", {})])
    try:
        pids = wait_until(lambda: member_pids(log, 2), 20, "both members started")
        wait_until(lambda: log.read_text().count("hello from") == 2, 20, "both members' first lines")
        assert all(alive(pid) for pid in pids)
        process.kill()
        process.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in pids), 20, "the members stopped on their own")
    finally:
        process.kill()
        for pid in member_pids(log, 2) or []:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_member_that_ignores_sigterm_is_killed_after_the_bound(tmp_path):
    (tmp_path / "stubborn.py").write_text(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\n"
        "[time.sleep(0.05) for _ in range(1200)]\n")
    code = ("import sys\nfrom streamkit.cli.supervisor import Member, supervise\n"
            f"sys.exit(supervise([Member('w1', [sys.executable, {str(tmp_path / 'stubborn.py')!r}], "
            "None, '')], 1))\n")
    log = tmp_path / "supervisor.log"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=open(log, "wb"),
                               stderr=subprocess.STDOUT)
    try:
        pids = wait_until(lambda: member_pids(log, 1), 20, "the member started")
        wait_until(lambda: "[w1] up" in log.read_text(), 20, "the member's first line")
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
        assert code != 0 and "did not stop" in log.read_text(), log.read_text()
        assert time.monotonic() - started < 40
        assert not alive(pids[0])
    finally:
        process.kill()


MAIN_SCRIPT = '''
import streamkit as sk

app = sk.App("supmain", broker="memory://supmain", driver="memory", web_enabled=False)
words = app.topic("words")


@app.agent(words)
async def shout(stream):
    async for word in stream:
        print(word)


if __name__ == "__main__":
    app.main()
'''


def test_python_app_py_worker_starts_its_members_from_the_script(tmp_path):
    """``app.main()`` names the app ``__main__:app``: each member runs the script again."""
    (tmp_path / "supmain.py").write_text(MAIN_SCRIPT)
    log = tmp_path / "supervisor.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "supmain.py", "worker", "--processes", "2"], cwd=tmp_path,
                               env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        pids = wait_until(lambda: member_pids(log, 2), 30, "both members started")

        def started():
            assert process.poll() is None, log.read_text()
            lines = [line for line in log.read_text().splitlines() if "worker for 'supmain' started" in line]
            return sorted(line.split()[0] for line in lines) == ["[w1]", "[w2]"]

        wait_until(started, 60, "both members' workers started, each line with its member's id")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
        assert not [pid for pid in pids if alive(pid)]
        assert sorted(p.name for p in (tmp_path / "streamkit-data").iterdir()) == ["w1", "w2"]
    finally:
        process.kill()
