"""Prometheus metrics, computed from the runtime when scraped (nothing on the hot path)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..runtime.tasks import TaskState

if TYPE_CHECKING:
    from ..types.app import AppProtocol


class _RuntimeCollector:
    def __init__(self, app: "AppProtocol") -> None:
        self.app = app

    def collect(self) -> Iterator[Any]:
        runtime = self.app.runtime
        if runtime is None:
            return
        app_id = self.app.id
        records = CounterMetricFamily("streamkit_records_received", "Records fetched and routed", labels=["app"])
        records.add_metric([app_id], runtime.router.records_in)
        yield records
        errors = CounterMetricFamily("streamkit_error_policy_records", "Records handled by the error policy",
                                     labels=["app", "action"])
        for action, count in runtime.errors.counts.items():
            errors.add_metric([app_id, action], count)
        yield errors
        lag = GaugeMetricFamily("streamkit_consumer_lag", "High watermark minus processed offset",
                                labels=["app", "topic", "partition"])
        consumer = runtime.consumer
        for tp, delivered in list(runtime.router.delivered.items()):
            high = consumer.highwater(tp) if consumer is not None else None
            if high is not None:
                lag.add_metric([app_id, tp.topic, str(tp.partition)], max(0, high - delivered))
        yield lag
        tasks = runtime.tasks
        by_state = GaugeMetricFamily("streamkit_tasks", "Tasks on this worker per state (runtime/tasks.py)",
                                     labels=["app", "state"])
        for state in TaskState:
            if state != TaskState.CLOSED:
                by_state.add_metric([app_id, state.value], tasks.count(state))
        yield by_state
        tables = runtime.tables
        if tables is not None:
            progress = tables.progress
            remaining = GaugeMetricFamily("streamkit_task_restore_remaining",
                                          "Changelog records a restoring task still has to replay",
                                          labels=["app", "task"])
            for number, (done, total) in tasks.restoring(progress.per_partition).items():
                remaining.add_metric([app_id, str(number)], max(0, total - done))
            yield remaining
            rec = GaugeMetricFamily("streamkit_recovery_records", "Changelog records of the current recovery",
                                    labels=["app", "state"])
            rec.add_metric([app_id, "done"], progress.done)
            rec.add_metric([app_id, "total"], progress.total)
            yield rec
            active = GaugeMetricFamily("streamkit_recovery_active", "1 while tables recover", labels=["app"])
            active.add_metric([app_id], 1 if progress.active else 0)
            yield active
            tailer = CounterMetricFamily("streamkit_changelog_tailer_failures",
                                         "Restarts of the standby/global-table changelog tailer after a failure",
                                         labels=["app"])
            tailer.add_metric([app_id], tables.tailer.failures)
            yield tailer
            dropped = CounterMetricFamily("streamkit_changelog_blocks_dropped",
                                          "Changelog blocks of checkpoints whose offsets never committed, not restored "
                                          "(at-least-once; their records were processed again)", labels=["app"])
            dropped.add_metric([app_id], tables.blocks_dropped)
            yield dropped
            windowed = [t for t in tables.tables if t.window is not None]
            if windowed:
                late = CounterMetricFamily("streamkit_window_late_records",
                                           "Records whose update to a closed window was dropped",
                                           labels=["app", "table"])
                closed = CounterMetricFamily("streamkit_windows_closed", "Windows closed and emitted",
                                             labels=["app", "table"])
                for table in windowed:
                    late.add_metric([app_id, table.name], table.late_records)
                    closed.add_metric([app_id, table.name], table.windows_closed)
                yield late
                yield closed
        watch = runtime.broker_watch
        if watch is not None:
            up = GaugeMetricFamily("streamkit_broker_reachable", "0 while the broker is unreachable", labels=["app"])
            up.add_metric([app_id], 1 if watch.reachable else 0)
            yield up
            down = GaugeMetricFamily("streamkit_broker_unreachable_seconds", "How long the current outage has lasted",
                                     labels=["app"])
            down.add_metric([app_id], watch.down_for)
            yield down
            outages = CounterMetricFamily("streamkit_broker_outages", "Times the broker became unreachable",
                                          labels=["app"])
            outages.add_metric([app_id], watch.outages)
            yield outages
        checkpoint = runtime.checkpoint
        if checkpoint is not None:
            rollbacks = CounterMetricFamily("streamkit_checkpoint_rollbacks",
                                            "Checkpoints rolled back (failed delivery or transaction): records reprocessed",
                                            labels=["app"])
            rollbacks.add_metric([app_id], checkpoint.rollbacks)
            yield rollbacks
        restarts = CounterMetricFamily("streamkit_agent_restarts",
                                       "Agent restarts after exceptions (with or without a record held)",
                                       labels=["app", "agent"])
        for name, agent in self.app.agents.items():
            restarts.add_metric([app_id, name], agent.restarts)
        yield restarts
        failed = GaugeMetricFamily("streamkit_agent_failed", "1 once an agent is failed (agent_max_restarts)",
                                   labels=["app", "agent"])
        for name, agent in self.app.agents.items():
            failed.add_metric([app_id, name], 1 if agent.failure is not None else 0)
        yield failed


class Metrics:
    def __init__(self, app: "AppProtocol") -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_RuntimeCollector(app))
        self.commit_seconds = Histogram("streamkit_commit_seconds", "Checkpoint duration", registry=self.registry,
                                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
