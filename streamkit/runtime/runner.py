"""Run one worker in the foreground until SIGINT/SIGTERM, or until the ``stop`` policy halts it.

Exit codes: 0 after a graceful stop, 1 when the worker halted on an error, 2 when it could not
start (broker unreachable, bad configuration) — each with one clear line, not a traceback.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

from ..errors import BrokerUnavailable, ConfigurationError
from ..transport.auth_errors import refusal_in
from .diagnostics import flow_state, install_dump_signal

log = logging.getLogger("streamkit.worker")


async def serve(app: Any) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    install_dump_signal(loop, lambda: flow_state(app.runtime))
    try:
        await app.start()
    except (BrokerUnavailable, ConfigurationError) as exc:
        print(f"streamkit: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a client refused at start for want of an ACL (init_transactions, ...)
        refused = refusal_in(exc, app.conf, group=app.id)
        if refused is None:
            raise
        print(f"streamkit: {refused}", file=sys.stderr)
        return 2
    runtime = app.runtime
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(runtime.failed.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()
    if stop.is_set():
        log.info("signal received: finishing in-flight records, committing, stopping")
    try:
        async with asyncio.timeout(app.conf.stop_timeout + 10):  # wait_for may swallow a cancellation (3.11)
            await app.stop()
    except asyncio.TimeoutError:
        print("streamkit: graceful stop timed out; exiting", file=sys.stderr)
        return 1
    if isinstance(runtime.fatal, ConfigurationError):  # a misconfiguration found while running (a missing ACL)
        print(f"streamkit: {runtime.fatal}", file=sys.stderr)
        return 2
    if runtime.fatal is not None:
        print(f"streamkit: worker halted: {runtime.fatal or repr(runtime.fatal)}", file=sys.stderr)
        return 1
    failed = [agent.failure for agent in app.agents.values() if agent.failure is not None]
    if failed:  # it ran without them: stopped, it says so (the orchestrator sees a failure)
        print(f"streamkit: {failed[0]}" + (f" (and {len(failed) - 1} more agent(s))" if len(failed) > 1 else ""),
              file=sys.stderr)
        return 1
    return 0


def run_worker(app: Any) -> int:
    return asyncio.run(serve(app))
