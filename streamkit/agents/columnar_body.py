"""The worker's loop of a columnar agent (agents/columnar.py): per batch in hand, decode it into
Arrow, run the function (retried, then bisected), queue the outputs, then acknowledge the batch.

The guarantees are any agent's: the records stay held until their outputs and dead letters are
queued, so a checkpoint commits past them only after the producer has them (and under
exactly-once in the transaction of their offsets: sends route by ``processing``, the batch's
last record, of the same partition as every record in it).
"""
from __future__ import annotations

import logging
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..runtime.event import processing

if TYPE_CHECKING:
    from ..streams.stream import Stream
    from .running import RunningAgent

log = logging.getLogger("streamkit.agent")
_message_of = attrgetter("message")


def columnar_body(agent: "RunningAgent") -> Callable[["Stream"], Awaitable[None]]:
    """The agent's body: ``Stream.batch_in_hand`` at a time, acknowledged once its outputs are queued."""
    columnar = agent.columnar
    assert columnar is not None
    context = agent._context  # noqa: SLF001 - the agent's run loop, kept beside Agent
    assert context is not None
    app = agent.app
    retries, no_retry = app.conf.agent_retries, agent.no_retry_types()
    stage = f"agent {agent.name}"

    def failed(rows: int, attempt: int, exc: BaseException) -> None:
        agent.restarts += 1
        what = "retrying" if attempt <= retries else "splitting it to find the failing records"
        log.error("columnar agent %s failed on a batch of %d records (attempt %d of %d; %s): %s: %s", agent.name,
                  rows, attempt, retries + 1, what, type(exc).__name__, exc)

    sinks = [sink.name for sink in columnar.sinks]

    async def send(outputs: list[Any]) -> None:
        """The batch's outputs in order: at once while the producer has room, the rest (and all
        of them while a sensor listens, a scheduled send waits or a sink is not created yet)
        the waiting way."""
        producer = context.producer
        known = app.topic_creation.known
        sent = 0
        if producer is not None and not (app.sensors.active or app.scheduled_sends.pending) \
                and all(sink in known for sink in sinks):
            sent = producer.try_send_many(outputs)
        for topic, key, value in outputs[sent:]:  # no room (or not created yet): wait, in order
            await app.send_raw(topic, key, value, track=False)

    async def run(stream: "Stream") -> None:
        while True:
            events = await stream.batch_in_hand()
            messages = list(map(_message_of, events))
            batch, kept, failures = columnar.decode(messages)
            dead = [(events[i], "decode", exc) for i, exc in failures]
            outputs: list[Any] = []
            if batch.num_rows:
                outputs, failing = columnar.apply(batch, retries=retries, no_retry=no_retry, on_failure=failed)
                dead.extend((events[kept[i]], stage, exc) for i, exc in failing)
            await send(outputs)
            errors = context.errors
            for event, where, exc in sorted(dead, key=lambda d: d[0].offset):
                token = processing.set(event)  # exactly-once: its dead letter joins its transaction
                try:
                    assert errors is not None  # the worker that started the agent runs
                    await errors.handle(where, event.message, exc)
                finally:
                    processing.reset(token)
            stream.ack_held()

    return run
