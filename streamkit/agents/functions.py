"""Plain-function agents and folds run over the batch in hand: no coroutine per record.

``def fn(value)`` and ``@app.fold`` functions cannot await, so the worker runs them over the rest
of each fetched batch in one synchronous loop (``Stream.run_in_hand``): per record the function,
its outputs queued to the sinks, the ack. The loop leaves the batch only where an ``async for``
agent would wait: a sink producer without room, a reply to send, a committing exactly-once
checkpoint, a revocation, the batch's end. The guarantees are the generator path's: a record is
acked once its outputs are queued, a record that fails is the one held (retried, then the error
policy), and a checkpoint sees only whole records.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from ..runtime.event import Event

if TYPE_CHECKING:
    from ..streams.stream import Stream
    from .running import RunningAgent

# what a record left to await: (output, event, first sink still to serve, outputs after it)
Stalled = tuple[Any, Event, int, Sequence[Any]]


def _handler(agent: "RunningAgent") -> Callable[[Event], "Stalled | None"]:
    """``event -> None`` once its outputs are all queued, else what is left to await."""
    emit_now = agent._emit_now  # noqa: SLF001 - the agent's run loop, kept beside Agent
    fold = agent.fold
    send = agent._one_sink_send()  # one sink topic: its send bound once  # noqa: SLF001 - the agent's run loop, kept beside Agent
    if fold is None and send is not None:
        fun = agent.source_fun

        def handle_one_sink(event: Event) -> Stalled | None:
            output = fun(event.value)
            if output is None:
                return None
            if not send(event.key, output):
                return output, event, 0, ()
            return (output, event, 1, ()) if event.message.headers else None  # 1: the reply is left

        return handle_one_sink
    if fold is None:
        fun = agent.source_fun

        def handle(event: Event) -> Stalled | None:
            output = fun(event.value)
            if output is None:
                return None
            left = emit_now(output, event)
            return None if left < 0 else (output, event, left, ())

        return handle

    step, initial, table, missing = fold.step, fold.initial, fold.table, object()

    def handle_fold(event: Event) -> Stalled | None:
        key = event.key
        state = table.get(key, missing)
        state, outputs = step(initial() if state is missing else state, event.value)
        table[key] = state
        for i, output in enumerate(outputs):
            left = emit_now(output, event)
            if left >= 0:
                return output, event, left, outputs[i + 1:]
        return None

    return handle_fold


def batch_body(agent: "RunningAgent") -> Callable[["Stream"], Awaitable[None]]:
    """The worker's body for a plain-function or fold agent (``Agent.fun`` stays the per-record
    generator for the test context and Spark, which run the same function)."""
    handle = _handler(agent)
    emit, emit_now = agent._emit, agent._emit_now  # noqa: SLF001 - the agent's run loop, kept beside Agent

    async def run(stream: "Stream") -> None:
        take, next_event, run_in_hand = stream._next_in_batch, stream.next_event, stream.run_in_hand  # noqa: SLF001 - the run loop drives its stream's batch
        while True:
            stalled = run_in_hand(take() or await next_event(), handle)
            if stalled is not None:  # the record stays held until its outputs are all queued
                output, event, left, rest = stalled
                await emit(output, event, left)
                for output in rest:
                    left = emit_now(output, event)
                    if left >= 0:
                        await emit(output, event, left)

    return run
