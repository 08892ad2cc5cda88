"""Faust's app signals: ``@app.on_partitions_assigned.connect`` and friends.

Receivers are ``async def fn(sender, **kwargs)`` (or plain functions), called in the order they
connected with the app as sender. One receiver's exception is logged with its traceback and
does not stop the others nor the worker.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable

log = logging.getLogger("streamkit.signals")


class Signal:
    def __init__(self, name: str, sender: Any) -> None:
        self.name = name
        self.sender = sender
        self.receivers: list[Callable[..., Any]] = []
        self.failures = 0

    def connect(self, fun: Callable[..., Any] | None = None) -> Any:
        """``@signal.connect`` (or ``signal.connect(fn)``)."""
        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            self.receivers.append(f)
            return f

        return add(fun) if fun is not None else add

    def disconnect(self, fun: Callable[..., Any]) -> None:
        self.receivers.remove(fun)

    async def send(self, **kwargs: Any) -> None:
        for receiver in list(self.receivers):
            try:
                result = receiver(self.sender, **kwargs)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self.failures += 1
                log.exception("%s receiver %s failed", self.name, getattr(receiver, "__qualname__", receiver))


SIGNALS = ("on_partitions_assigned", "on_partitions_revoked", "on_rebalance_complete", "on_worker_init",
           "on_before_shutdown", "on_before_configured", "on_configured", "on_after_configured")
