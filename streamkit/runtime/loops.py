"""Supervision of a worker's background loops: none of them may die silently.

A task whose coroutine raised keeps its exception until someone awaits it; the worker awaited
its loops only when stopping, so a commit loop killed by a bad value (``commit_interval="soon"``)
left the worker consuming for minutes with nothing committed and nothing logged. Every loop the
runtime starts goes through one of these:

- ``halting``: a loop the worker cannot do without and that cannot safely start again from
  scratch (consuming, committing): an unexpected exception halts the worker through its
  ``fail`` (one error line naming the loop and the exception; the CLI exits non-zero).
- ``restarting``: a loop that only observes or tidies (broker watch, membership heartbeat,
  repartition purge, cluster-claim reader): it is started again after a pause that doubles up
  to a ceiling, with a log line each time.

A loop that returns ends quietly; cancelling the task (a stop) is never a failure.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger("streamkit.worker")

RESTART_BACKOFF = (1.0, 60.0)  # seconds before the first restart, and the most between two


class LoopFailed(RuntimeError):
    """A vital loop raised: what the worker halts with (its message names the loop)."""

    def __init__(self, name: str, exc: BaseException) -> None:
        super().__init__(f"the {name} loop failed unexpectedly: {exc!r}")
        self.loop = name


def halting(name: str, loop: Callable[[], Awaitable[Any]],
            fail: Callable[[BaseException], Awaitable[Any]]) -> asyncio.Task[None]:
    """Run ``loop()`` as a task; an exception escaping it halts the worker via ``fail``."""

    async def supervised() -> None:
        try:
            await loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("the %s loop failed", name, exc_info=exc)  # the traceback, for a bug report
            await fail(LoopFailed(name, exc))

    return asyncio.create_task(supervised(), name=f"streamkit-{name.replace(' ', '-')}")


def restarting(name: str, loop: Callable[[], Awaitable[Any]], *,
               backoff: tuple[float, float] | None = None) -> asyncio.Task[None]:
    """Run ``loop()`` as a task, started again (after a growing pause) whenever it raises."""

    async def supervised() -> None:
        first, most = backoff or RESTART_BACKOFF
        pause = first
        clock = asyncio.get_running_loop()
        while True:
            started = clock.time()
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if clock.time() - started > most:  # it ran well for a while: a new failure, not a streak
                    pause = first
                log.warning("the %s loop failed unexpectedly (%r); restarting it in %.1fs", name, exc, pause,
                            exc_info=log.isEnabledFor(logging.DEBUG) and exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, most)

    return asyncio.create_task(supervised(), name=f"streamkit-{name.replace(' ', '-')}")


class AdminLoop:
    """A tidying loop (``restarting``) that talks to the broker through an admin client opened
    when first needed; ``stop`` cancels the loop and closes the client. The repartition purge
    and the pattern watch are two."""

    name = "admin"

    def __init__(self) -> None:
        self._admin: Any = None  # transport.base.Admin, once opened
        self._task: asyncio.Task[None] | None = None

    def wanted(self) -> bool:
        """Whether there is anything for the loop to do (else ``start`` starts nothing)."""
        return True

    async def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self.wanted():
            self._task = restarting(self.name, self._run)

    async def admin(self, connect: Callable[[], Awaitable[Any]]) -> Any:
        if self._admin is None:
            self._admin = await connect()
        return self._admin

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._admin is not None:
            admin, self._admin = self._admin, None
            try:
                await admin.stop()
            except Exception as exc:  # closing a client the worker no longer needs
                log.debug("%s admin close: %r", self.name, exc)
