"""``streamkit worker --processes N``: N members of the app's consumer group under one supervisor.

A worker is one Python process, so it uses one core; this runs N of them from one command, as
Bytewax's ``-w`` does. The supervisor starts each member as the ordinary worker (same app, same
options) with its own web port (``web_port + i``: each advertises its own URL in the cluster
claims, so table routing between them works as between any workers) and its own data dir
(``data_dir/w<i>``: RocksDB stores never collide). It prefixes every line a member prints with
``[w<i>]``, forwards SIGTERM/SIGINT, waits a bounded time, and exits with one code.

A member that stops while the others run (a crash, a kill, a ``stop`` policy) is a failure of
the whole: the supervisor names it in one line and stops the others (fail fast: the orchestrator
that started the command restarts it, as it would a single worker). Exit codes: 0 when every
member stopped cleanly after a signal; else the first failed member's code (128 + n when it
died of signal n; 1 when it stopped cleanly while nobody asked it to, or had to be killed).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from ..errors import ConfigurationError

AUTO = "auto"
GRACE = 15.0
"""Seconds a member gets beyond ``stop_timeout`` after SIGTERM (the worker's own bound is
``stop_timeout + 10``); then it is killed."""
POLL = 0.1


def cores_available() -> int:
    """The cores this process may run on (its CPU affinity; a container's cpuset counts)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def process_count(given: str) -> int:
    """``--processes``: a whole number >= 1, or ``auto``."""
    text = given.strip().lower()
    if text == AUTO:
        return cores_available()
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ConfigurationError(f"--processes {given!r}: give a whole number of worker processes, 1 or more, "
                             f"or auto (the {cores_available()} core(s) this process may use)")


@dataclass(frozen=True)
class Member:
    """One worker process of the set: its id (``w1``...), command line, web port, data dir."""

    name: str
    argv: list[str]
    web_port: int | None
    data_dir: str


def worker_command(app_spec: str) -> list[str]:
    """How to start a member's worker: ``python -m streamkit worker -A spec``, or the script again
    when the app came from ``app.main()`` (``__main__:app`` means nothing to a new interpreter)."""
    if not app_spec.startswith("__main__:"):
        return [sys.executable, "-m", "streamkit", "worker", "-A", app_spec]
    main = sys.modules["__main__"]
    module = getattr(getattr(main, "__spec__", None), "name", None)
    if module:  # python -m package.module worker
        return [sys.executable, "-m", module, "worker"]
    script = getattr(main, "__file__", None)
    if not script:
        raise ConfigurationError("--processes starts each worker anew, which an app defined in an interactive "
                                 "session cannot: put it in a module and run streamkit -A module:app worker")
    return [sys.executable, os.path.abspath(script), "worker"]


def plan_members(app_spec: str, conf: Any, count: int, loglevel: str) -> list[Member]:
    """The members for ``conf`` (the app's settings with the command's options applied); a
    setting that only one worker may hold is refused, naming it."""
    web = conf.web_enabled
    if web and conf.web_advertised_url:
        raise ConfigurationError(
            f"web_advertised_url={conf.web_advertised_url!r} is one address and --processes {count} starts "
            f"{count} workers that each need their own: unset it, or run one worker per command")
    if conf.transactional_id:
        raise ConfigurationError(
            f"transactional_id={conf.transactional_id!r} can be held by one worker only (two fence each other) "
            f"and --processes {count} starts {count}: unset it (each member then derives its own)")
    instance = (conf.consumer_config or {}).get("group.instance.id")
    if instance:
        raise ConfigurationError(
            f"consumer_config group.instance.id={instance!r} is one static member and --processes {count} "
            f"starts {count}: drop it, or run one worker per command")
    if web and conf.web_port and conf.web_port + count - 1 > 65535:
        raise ConfigurationError(
            f"--web-port {conf.web_port} with --processes {count} needs ports up to {conf.web_port + count - 1}, "
            f"past 65535: give a lower --web-port")
    members = []
    for i in range(1, count + 1):
        name = f"w{i}"
        data_dir = str(Path(conf.data_dir) / name)
        argv = [*worker_command(app_spec), "-l", loglevel, "--data-dir", data_dir]
        port = None
        if web:
            port = conf.web_port + i - 1 if conf.web_port else 0
            argv += ["--web-host", conf.web_host, "--web-port", str(port)]
        else:
            argv.append("--without-web")
        members.append(Member(name, argv, port, data_dir))
    return members


def _pdeathsig() -> None:
    """In the child: receive SIGTERM if the supervisor dies (even by SIGKILL), so no member is
    left behind unsupervised (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class _Running:
    """A started member: its process and the threads copying its output, line by line, prefixed."""

    def __init__(self, member: Member, lock: threading.Lock) -> None:
        self.member = member
        self.signalled = False
        # Its own process group: a Ctrl-C in the terminal reaches the supervisor only, which forwards it once.
        self.process = subprocess.Popen(member.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        process_group=0, preexec_fn=_pdeathsig)
        self.copiers = [threading.Thread(target=_copy, args=(pipe, out, f"[{member.name}] ".encode(), lock),
                                         daemon=True)
                        for pipe, out in ((self.process.stdout, sys.stdout), (self.process.stderr, sys.stderr))]

    def signal(self, signum: int) -> None:
        self.signalled = self.signalled or signum in (signal.SIGTERM, signal.SIGINT)
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, signum)
            except ProcessLookupError:
                pass

    def describe_exit(self) -> str:
        code = self.process.returncode
        if code is not None and code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"


def _copy(pipe: IO[bytes] | None, out: Any, prefix: bytes, lock: threading.Lock) -> None:
    assert pipe is not None
    target = getattr(out, "buffer", None)
    for line in iter(pipe.readline, b""):
        with lock:
            try:
                if target is not None:
                    target.write(prefix + line)
                else:
                    out.write((prefix + line).decode(errors="replace"))
                out.flush()
            except (OSError, ValueError):  # our own output closed: keep draining the member's pipe
                pass
    pipe.close()


def _say(text: str) -> None:
    click.echo(f"streamkit: {text}", err=True)


def exit_code(returncode: int) -> int:
    """A member's exit status as a shell reports it (128 + n for a death by signal n)."""
    return 128 - returncode if returncode < 0 else returncode


def supervise(members: list[Member], stop_timeout: float) -> int:
    """Run ``members`` until a signal (0 when they all stop cleanly) or until one stops (its code)."""
    asked: list[int] = []
    dump = getattr(signal, "SIGUSR1", None)  # a worker dumps its tasks on it: each member does
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, dump) if sig is not None}

    def on_signal(signum: int, _frame: Any) -> None:
        # Only record it and pass it on: the main loop does the rest (no Popen calls re-entered here).
        if signum != dump:
            asked.append(signum)
        for member in running:
            member.signal(signum)

    running: list[_Running] = []
    lock = threading.Lock()
    for sig in previous:
        signal.signal(sig, on_signal)
    try:
        for member in members:  # all forked before the copier threads start (preexec_fn and threads)
            if asked:
                break
            running.append(_Running(member, lock))
        for started in running:
            web = f", web port {started.member.web_port}" if started.member.web_port is not None else ""
            _say(f"started member {started.member.name} (pid {started.process.pid}{web}, "
                 f"data dir {started.member.data_dir})")
            for copier in started.copiers:
                copier.start()
        return _watch(running, asked, stop_timeout)
    finally:
        for started in running:  # whatever happened above, none outlives the supervisor
            if started.process.poll() is None:
                started.process.kill()
                started.process.wait()
        for started in running:
            for copier in started.copiers:
                if copier.is_alive():
                    copier.join(5)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _watch(running: list[_Running], asked: list[int], stop_timeout: float) -> int:
    """Wait for a signal or a member's end; then stop the rest within the bound; the exit code."""
    failed: _Running | None = None
    while not asked and failed is None:
        failed = next((m for m in running if m.process.poll() is not None), None)
        if failed is None:
            time.sleep(POLL)
    if failed is not None:
        _say(f"member {failed.member.name} (pid {failed.process.pid}) {failed.describe_exit()} while the others "
             f"ran; stopping the other members")
        for member in running:
            member.signal(signal.SIGTERM)
    for member in running:  # one started while the signal came, before the handler knew it
        if not member.signalled:
            member.signal(asked[0] if asked else signal.SIGTERM)
    deadline = time.monotonic() + stop_timeout + GRACE
    while any(m.process.poll() is None for m in running) and time.monotonic() < deadline:
        time.sleep(POLL)
    stuck = [m for m in running if m.process.poll() is None]
    for member in stuck:
        _say(f"member {member.member.name} (pid {member.process.pid}) did not stop within "
             f"{stop_timeout + GRACE:g}s of SIGTERM; killing it")
        member.process.kill()
        member.process.wait()
    if failed is not None:
        return exit_code(failed.process.returncode) or 1
    for member in running:
        if member in stuck:
            return 1
        if member.process.returncode != 0:
            _say(f"member {member.member.name} (pid {member.process.pid}) {member.describe_exit()} while stopping")
            return exit_code(member.process.returncode)
    return 0
