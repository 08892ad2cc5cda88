"""OpenTelemetry for streamkit apps: ``app.sensors.add(OpenTelemetrySensor())`` (``pip install
streamkit[otel]``; the app configures its own exporter through the OpenTelemetry SDK).

Traces: a CONSUMER span per record an agent processes (``process <topic>``), child of the trace
its headers carry (W3C ``traceparent``), current while the agent works on the record; a
PRODUCER span per send, whose context goes out in the record's headers. A record an agent sends
while processing another is therefore in the same trace, across workers and topics.
Metrics: ``streamkit.events`` (records processed, by topic) and ``streamkit.event.duration``
(seconds an agent spent on a record).
"""
from __future__ import annotations

import time
from typing import Any

try:
    from opentelemetry import context, metrics, propagate, trace
    from opentelemetry.propagators.textmap import Getter, Setter
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("streamkit.otel needs OpenTelemetry: pip install 'streamkit[otel]'") from exc

from .sensors import Sensor


class _HeaderGetter(Getter[Any]):
    """Reads W3C trace context from Kafka headers (a list of ``(name, bytes)``)."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        values = [v.decode("latin-1") if isinstance(v, bytes) else str(v) for k, v in carrier or () if k == key]
        return values or None

    def keys(self, carrier: Any) -> list[str]:
        return [k for k, _ in carrier or ()]


class _HeaderSetter(Setter[Any]):
    def set(self, carrier: Any, key: str, value: str) -> None:
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode("latin-1")))


_GETTER, _SETTER = _HeaderGetter(), _HeaderSetter()


class OpenTelemetrySensor(Sensor):
    """Spans and metrics for every record processed and sent (module docstring)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.tracer = trace.get_tracer("streamkit", tracer_provider=tracer_provider)
        meter = metrics.get_meter("streamkit", meter_provider=meter_provider)
        self.events = meter.create_counter("streamkit.events", unit="{record}",
                                           description="Records processed by agents")
        self.duration = meter.create_histogram("streamkit.event.duration", unit="s",
                                               description="Time an agent spent on a record")

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> Any:
        parent = propagate.extract(event.message.headers, getter=_GETTER)
        agent = getattr(getattr(stream, "owner", None), "name", None)
        span = self.tracer.start_span(f"process {tp.topic}", context=parent, kind=SpanKind.CONSUMER, attributes={
            "messaging.system": "kafka", "messaging.operation.type": "process", "messaging.destination.name": tp.topic,
            "messaging.destination.partition.id": str(tp.partition), "messaging.kafka.offset": offset,
            **({"streamkit.agent": agent} if agent else {})})
        token = context.attach(trace.set_span_in_context(span))
        return span, token, time.monotonic(), agent

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        if state is None:
            return
        span, token, started, agent = state
        try:
            context.detach(token)
        except Exception:  # detached out of order (another task): the span still ends
            pass
        span.end()
        attributes = {"messaging.destination.name": tp.topic, **({"streamkit.agent": agent} if agent else {})}
        self.events.add(1, attributes)
        self.duration.record(time.monotonic() - started, attributes)

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        span = self.tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes={
            "messaging.system": "kafka", "messaging.operation.type": "send", "messaging.destination.name": topic,
            "messaging.message.body.size": valsize})
        propagate.inject(message.headers, context=trace.set_span_in_context(span), setter=_SETTER)
        return span

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        if state is not None:
            state.end()

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        if state is not None:
            state.record_exception(exc)
            state.set_status(Status(StatusCode.ERROR, str(exc)))
            state.end()
