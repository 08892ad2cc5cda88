"""``kill -USR1 <worker pid>`` prints what every asyncio task and thread is waiting on.

A worker that stops making progress without failing (a stalled commit, a fetch that never
returns) is otherwise a black box in production; this is the same dump py-spy gives, without
installing anything, written to stderr so it lands in the worker's log.
"""
from __future__ import annotations

import asyncio
import io
import signal
import sys
import threading
import traceback
from typing import TextIO


def dump_state(out: TextIO | None = None) -> str:
    """Every pending task's stack (innermost await last) and every thread's stack, as text."""
    buf = io.StringIO()
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        tasks = set()
    buf.write(f"--- streamkit: {len(tasks)} asyncio task(s) ---\n")
    for task in sorted(tasks, key=lambda t: t.get_name()):
        buf.write(f"task {task.get_name()} ({task.get_coro()!r}):\n")
        task.print_stack(limit=30, file=buf)
    frames = sys._current_frames()
    buf.write(f"--- streamkit: {len(frames)} thread(s) ---\n")
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in frames.items():
        buf.write(f"thread {names.get(ident, ident)}:\n")
        buf.write("".join(traceback.format_stack(frame, limit=30)))
    text = buf.getvalue()
    stream = out if out is not None else sys.stderr
    stream.write(text)
    stream.flush()
    return text


def install_dump_signal(loop: asyncio.AbstractEventLoop) -> None:
    """SIGUSR1 dumps the worker's tasks and threads (no-op where the signal does not exist)."""
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is not None:
        loop.add_signal_handler(usr1, dump_state)
