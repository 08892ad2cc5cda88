"""What the agent's run loops (functions.py, columnar_body.py) and its test context
(testing.py, in_process.py) use of an Agent: agent.py imports them to run, so they see the
Agent through this protocol rather than importing agent.py back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..runtime.event import Event

if TYPE_CHECKING:
    from ..runtime.context import ProcessingContext
    from ..topics import Topic
    from ..types.app import AppProtocol
    from .columnar import Columnar
    from .fold import Fold


class RunningAgent(Protocol):
    """An ``@app.agent`` as its run loops see it (agents/agent.py's Agent)."""

    restarts: int

    @property
    def app(self) -> "AppProtocol": ...

    @property
    def name(self) -> str: ...

    @property
    def topic(self) -> "Topic": ...

    @property
    def fun(self) -> Callable[..., Any]: ...

    @property
    def source_fun(self) -> Callable[..., Any]: ...

    @property
    def is_generator(self) -> bool: ...

    @property
    def sinks(self) -> list[Any]: ...

    @property
    def fold(self) -> "Fold | None": ...

    @property
    def columnar(self) -> "Columnar | None": ...

    @property
    def _context(self) -> "ProcessingContext | None": ...

    def no_retry_types(self) -> tuple[type[BaseException], ...]: ...

    def _emit_now(self, value: Any, event: Event | None) -> int: ...

    def _one_sink_send(self) -> Callable[[Any, Any], bool] | None: ...

    async def _emit(self, value: Any, event: Event | None, start: int = 0) -> None: ...
