"""``kill -USR1 <worker pid>`` prints what every asyncio task and thread is waiting on.

A worker that stops making progress without failing (a stalled commit, a fetch that never
returns) is otherwise a black box in production; this is the same dump py-spy gives, without
installing anything, written to stderr so it lands in the worker's log.
"""
from __future__ import annotations

import asyncio
import io
import linecache
import signal
import sys
import threading
import traceback
from typing import Any, Callable, TextIO


def await_chain(coro: Any, limit: int = 40) -> list[str]:
    """Where a suspended coroutine waits, outermost first: each coroutine or async generator it
    awaits, down to the innermost (``Task.print_stack`` shows only the task's own frame)."""
    lines: list[str] = []
    while coro is not None and len(lines) < limit:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            code, lineno = frame.f_code, frame.f_lineno
            # a compiled module's coroutine (streamkit/compiled.py) has a frame without a line
            source = linecache.getline(code.co_filename, lineno).strip() if lineno else "(compiled)"
            lines.append(f"  {code.co_filename}:{lineno or '?'} in {code.co_name}: {source}")
        coro = (getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
                or getattr(coro, "gi_yieldfrom", None))
    return lines


def dump_state(out: TextIO | None = None, flow: Callable[[], list[str]] | None = None) -> str:
    """Every pending task's await chain and every thread's stack, as text; ``flow``: lines on
    what gates the records (assignment, pauses, barrier, inboxes), from the running worker."""
    buf = io.StringIO()
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        tasks = set()
    if flow is not None:
        try:
            lines = flow()
        except Exception as exc:  # noqa: BLE001 - a dump must never fail
            lines = [f"(the worker's flow state could not be read: {exc!r})"]
        buf.write("--- streamkit: flow ---\n" + "".join(f"  {line}\n" for line in lines))
    buf.write(f"--- streamkit: {len(tasks)} asyncio task(s) ---\n")
    for task in sorted(tasks, key=lambda t: t.get_name()):
        buf.write(f"task {task.get_name()}:\n")
        buf.write("".join(f"{line}\n" for line in await_chain(task.get_coro())))
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


def install_dump_signal(loop: asyncio.AbstractEventLoop, flow: Callable[[], list[str]] | None = None) -> None:
    """SIGUSR1 dumps the worker's tasks and threads (no-op where the signal does not exist)."""
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is not None:
        loop.add_signal_handler(usr1, lambda: dump_state(flow=flow))


def flow_state(runtime: Any) -> list[str]:
    """What lets records through a running worker, one line each: the assignment and what holds
    partitions back (pauses with their reasons, a revocation, a closed barrier, a pending seek,
    the exactly-once send gate), how far each partition was delivered and committed, and each
    subscriber's inbox. A worker that owns partitions and processes nothing shows why here."""
    if runtime is None:
        return ["no worker running"]
    router, checkpoint = runtime.router, runtime.checkpoint
    pauses = getattr(runtime.pauses, "reasons", {}) if runtime.pauses is not None else {}
    lines = [f"assigned: {sorted(runtime.assigned)}",
             f"paused: {({tp: sorted(why) for tp, why in pauses.items() if why})}",
             f"revoking: {router.partitions.revoking()}; barrier closed: {router.barrier.closed}; "
             f"pending seeks: {dict(runtime.ownership.pending_seeks)}; rebalancing: {runtime.rebalancing}",
             f"delivered: {dict(sorted(router.delivered.items()))}",
             f"committed: {dict(sorted(checkpoint.committed.items())) if checkpoint is not None else None}"]
    txns = getattr(runtime, "txns", None)
    if txns is not None:
        lines.append(f"exactly-once send gate open: {txns._open.is_set()}; units: {sorted(txns.units)}")  # noqa: SLF001 - a diagnostic dump shows internal state
    for topic in router.topics():
        for subscriber in router.subscribers_of(topic):
            lines.append(f"subscriber {subscriber.name}: {subscriber.inbox.qsize()} batch(es) queued")
    return lines
