"""Keyed folds: ``fn(state, value) -> (state, outputs)`` over a table, one definition that runs
in the asyncio worker and, unchanged, on Spark (where state lives in Spark's state store and
the final states are written to the table's changelog).

Each record's key selects the state; the new state is written back to the table and every
output is sent to the agent's sinks under the record's key. The function must be pure: state
and value in, state and outputs out, nothing else read or written.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Protocol

from ..errors import ConfigurationError
from ..runtime.event import processing

if TYPE_CHECKING:
    from ..streams.stream import Stream

FoldFun = Callable[[Any, Any], "tuple[Any, Iterable[Any] | None]"]
_MISSING = object()


class FoldTable(Protocol):
    """What a fold needs of its ``tables.table.Table`` (tables sit above agents in the layers)."""

    is_global: bool
    name: str
    default: Callable[[], Any] | None

    def get(self, key: Any, default: Any = None) -> Any: ...

    def __setitem__(self, key: Any, value: Any) -> None: ...


class Fold:
    """The pure part of a keyed fold: the step function and where its state lives."""

    def __init__(self, fun: FoldFun, table: FoldTable) -> None:
        if table.is_global:
            raise ConfigurationError(
                f"a fold keeps per-key state in a partitioned Table, not GlobalTable {table.name!r}"
            )
        self.fun = fun
        self.table: Any = table  # a tables.table.Table: Spark's fold reads its codecs and changelog too

    def initial(self) -> Any:
        return self.table.default() if self.table.default is not None else None

    def step(self, state: Any, value: Any) -> tuple[Any, list[Any]]:
        result = self.fun(state, value)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"fold {self.fun.__name__} must return (state, outputs), not {result!r:.80}")
        new_state, outputs = result
        return new_state, [] if outputs is None else list(outputs)

    def body(self) -> Callable[["Stream"], AsyncIterator[Any]]:
        """The agent body the worker runs: the table holds the state between records."""
        table, step, initial = self.table, self.step, self.initial

        async def fold(stream: "Stream") -> AsyncIterator[Any]:
            async for value in stream:
                key = processing.get().key
                state = table.get(key, _MISSING)
                state, outputs = step(initial() if state is _MISSING else state, value)
                table[key] = state
                for output in outputs:
                    yield output

        fold.__name__ = fold.__qualname__ = self.fun.__name__
        return fold


def per_record(fun: Callable[[Any], Any]) -> Callable[["Stream"], AsyncIterator[Any]]:
    """A plain ``def fn(value)`` agent as a stream body: its result is the output (None: none)."""

    async def each(stream: "Stream") -> AsyncIterator[Any]:
        async for value in stream:
            output = fun(value)
            if output is not None:
                yield output

    each.__name__ = each.__qualname__ = fun.__name__
    return each
