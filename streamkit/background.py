"""``@app.task`` and ``@app.service``: user code that runs beside the agents, as in Faust.

A task is a coroutine started once when the worker has started (``on_leader=True``: only on
the worker that owns the leader partition, decided at the first assignment); a service is a
mode ``Service`` (class or instance) started with the worker and stopped before it. Both are
supervised: an exception is logged with its traceback and counted, never silently swallowed,
and never takes the worker down.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger("streamkit.background")

LEADER_WAIT_POLL = 0.05  # seconds between checks for the first assignment (on_leader tasks)


class LeaderFlag:
    """``app.is_leader``: truthy as streamkit reads it, and callable as Faust's ``app.is_leader()``."""

    __slots__ = ("_value",)

    def __init__(self, value: bool) -> None:
        self._value = value

    def __bool__(self) -> bool:
        return self._value

    def __call__(self) -> bool:
        return self._value

    def __eq__(self, other: object) -> bool:
        return bool(other) == self._value if isinstance(other, (bool, LeaderFlag)) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return repr(self._value)


class Background:
    def __init__(self) -> None:
        self.tasks: list[tuple[Callable[..., Awaitable[Any]], bool]] = []
        self.services: list[Any] = []
        self.failures = 0
        self._running: list[asyncio.Task] = []
        self._started: list[Any] = []

    async def start(self, app: Any) -> None:
        for service in self.services:
            instance = service() if isinstance(service, type) else service
            await instance.start()
            self._started.append(instance)
        for fun, on_leader in self.tasks:
            name = getattr(fun, "__qualname__", repr(fun))
            self._running.append(asyncio.create_task(self._run(app, fun, on_leader, name), name=f"task:{name}"))

    async def _run(self, app: Any, fun: Callable[..., Awaitable[Any]], on_leader: bool, name: str) -> None:
        if on_leader:
            context = app.processing
            while context.running and not context.rebalances:
                await asyncio.sleep(LEADER_WAIT_POLL)
            if not app.is_leader:
                log.info("task %s runs on the leader only; this worker is not it", name)
                return
        try:
            takes_app = len(inspect.signature(fun).parameters) >= 1
            await (fun(app) if takes_app else fun())
        except asyncio.CancelledError:
            raise
        except Exception:
            self.failures += 1
            log.exception("task %s failed (the worker goes on)", name)

    async def stop(self) -> None:
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        self._running = []
        for instance in reversed(self._started):
            try:
                await instance.stop()
            except Exception:
                log.exception("service %r failed to stop", instance)
        self._started = []
