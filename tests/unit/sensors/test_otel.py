"""The OpenTelemetry sensor: one trace from a record through an agent, its send, the next agent
and its send (context carried in Kafka headers), and the processing metrics."""
from __future__ import annotations

import uuid

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import streamkit as faust
from streamkit.otel import OpenTelemetrySensor
from streamkit.testing import wait_for


async def test_a_trace_follows_a_record_through_two_agents_and_their_sends():
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    name = f"otel-{uuid.uuid4().hex[:6]}"
    app = faust.App(name, broker=f"memory://{name}", driver="memory", store="memory://", web_enabled=False)
    app.sensors.add(OpenTelemetrySensor(tracer_provider, MeterProvider(metric_readers=[reader])))
    source, middle, out = (app.topic(t, partitions=1) for t in ("in", "mid", "out"))
    done: list[str] = []

    @app.agent(source)
    async def first(stream):
        async for value in stream:
            await middle.send(value=value + "!")

    @app.agent(middle)
    async def second(stream):
        async for value in stream:
            await out.send(value=value + "?")
            done.append(value)

    async with app.running():
        await source.send(value="hi")  # outside any trace: the trace starts here
        await wait_for(lambda: done == ["hi!"], 10, message="the record passed both agents")
        await app.flush()
        await wait_for(lambda: len([s for s in exporter.get_finished_spans() if s.name == "process mid"]) == 1, 10,
                       message="the second agent's span ended (when it asked for the next record)")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"send in", "process in", "send mid", "process mid", "send out"} <= set(spans)
    assert len({s.context.trace_id for s in spans.values()}) == 1  # one trace, across the topics
    chain = ["send in", "process in", "send mid", "process mid", "send out"]
    for parent, child in zip(chain, chain[1:], strict=False):
        assert spans[child].parent.span_id == spans[parent].context.span_id, (child, parent)
    assert spans["process mid"].kind == SpanKind.CONSUMER and spans["send mid"].kind == SpanKind.PRODUCER
    assert spans["process mid"].attributes["streamkit.agent"] == "second"
    points = {(m.name, dict(p.attributes)["messaging.destination.name"]): p
              for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics for p in m.data.data_points}
    assert points[("streamkit.events", "in")].value == 1 and points[("streamkit.events", "mid")].value == 1
    assert points[("streamkit.event.duration", "mid")].count == 1
