"""Faust's sensors: objects told about every message, event, table access, send and commit.

    class Latency(faust.Sensor):
        def on_stream_event_in(self, tp, offset, stream, event):
            return time.monotonic()

        def on_stream_event_out(self, tp, offset, stream, event, state=None):
            observe(time.monotonic() - state)

    app.sensors.add(Latency())

The hooks and their arguments are Faust's. A sensor that raises is logged (once per hook) and
counted, never fatal. With no sensor added, each hook site costs one truthiness check of a
list: the hot path stays as fast as without sensors. ``app.monitor`` is Faust's Monitor, a
sensor keeping counters (served as JSON at ``/stats`` by the worker's web server).
"""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Iterator

log = logging.getLogger("streamkit.sensors")


class Sensor:
    """Base class: override the hooks you need (the ones below are no-ops)."""

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        """A record arrived from Kafka (before any agent saw it)."""

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> Any:
        """An agent's stream hands ``event`` out; the return value comes back to ``..._out``."""
        return None

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        """The agent is done with ``event`` (it asked for the next one)."""

    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        """A stream is done with the record (per stream: a topic read by two agents reports twice)."""

    def on_topic_buffer_full(self, tp: Any) -> None:
        """An agent's queue is full: fetching waits (backpressure)."""

    def on_table_get(self, table: Any, key: Any) -> None: ...

    def on_table_set(self, table: Any, key: Any, value: Any) -> None: ...

    def on_table_del(self, table: Any, key: Any) -> None: ...

    def on_commit_initiated(self, consumer: Any) -> Any:
        return None

    def on_commit_completed(self, consumer: Any, state: Any) -> None: ...

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        return None

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None: ...

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None: ...

    def on_rebalance_start(self, app: Any) -> Any:
        return None

    def on_rebalance_end(self, app: Any, state: Any) -> None: ...

    def on_web_request_start(self, app: Any, request: Any, *, view: Any = None) -> Any:
        return None

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None: ...


class SensorDelegate:
    """``app.sensors``: the sensors of an app, and the calls that reach all of them.

    ``active`` is the list hook sites test for truthiness before doing any work."""

    def __init__(self) -> None:
        self.active: list[Sensor] = []
        self.failures = 0
        self._reported: set[tuple[int, str]] = set()

    def add(self, sensor: Sensor) -> None:
        if sensor not in self.active:
            self.active.append(sensor)

    def remove(self, sensor: Sensor) -> None:
        self.active.remove(sensor)

    def __iter__(self) -> Iterator[Sensor]:
        return iter(list(self.active))

    def __len__(self) -> int:
        return len(self.active)

    def __contains__(self, sensor: object) -> bool:
        return sensor in self.active

    def call(self, hook: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``hook`` on every sensor; each one's result (None where it failed)."""
        results = []
        for sensor in list(self.active):
            try:
                results.append(getattr(sensor, hook)(*args, **kwargs))
            except Exception:
                results.append(None)
                self.failures += 1
                if (id(sensor), hook) not in self._reported:
                    self._reported.add((id(sensor), hook))
                    log.exception("sensor %s failed in %s (logged once; the worker goes on)",
                                  type(sensor).__name__, hook)
        return results

    def call_each(self, hook: str, states: list[Any], *args: Any, **kwargs: Any) -> None:
        """Call a closing hook (``..._out``, ``..._completed``) with each sensor's own state."""
        for sensor, state in zip(list(self.active), states, strict=False):
            try:
                getattr(sensor, hook)(*args, state, **kwargs)
            except Exception:
                self.failures += 1
                if (id(sensor), hook) not in self._reported:
                    self._reported.add((id(sensor), hook))
                    log.exception("sensor %s failed in %s (logged once; the worker goes on)",
                                  type(sensor).__name__, hook)


NO_SENSORS = SensorDelegate()  # streams outside an app (test contexts): never given a sensor


class Monitor(Sensor):
    """Faust's Monitor: counters of what the worker did, ``asdict()`` for /stats."""

    def __init__(self, max_avg_history: int = 100) -> None:
        self.messages_received_total = 0
        self.messages_received_by_topic: dict[str, int] = {}
        self.events_total = 0
        self.events_active = 0
        self.events_by_stream: dict[str, int] = {}
        self.events_runtime: deque[float] = deque(maxlen=max_avg_history)
        self.tables: dict[str, dict[str, int]] = {}
        self.commit_latency: deque[float] = deque(maxlen=max_avg_history)
        self.send_latency: deque[float] = deque(maxlen=max_avg_history)
        self.messages_sent = 0
        self.messages_sent_by_topic: dict[str, int] = {}
        self.send_errors = 0
        self.topic_buffer_full: dict[str, int] = {}
        self.rebalances = 0
        self.rebalance_end_latency: deque[float] = deque(maxlen=max_avg_history)

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        self.messages_received_total += 1
        self.messages_received_by_topic[tp.topic] = self.messages_received_by_topic.get(tp.topic, 0) + 1

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> Any:
        self.events_total += 1
        self.events_active += 1
        name = getattr(getattr(stream, "owner", None), "name", None) or tp.topic
        self.events_by_stream[name] = self.events_by_stream.get(name, 0) + 1
        return time.monotonic()

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        self.events_active -= 1
        if state is not None:
            self.events_runtime.append(time.monotonic() - state)

    def on_topic_buffer_full(self, tp: Any) -> None:
        self.topic_buffer_full[tp.topic] = self.topic_buffer_full.get(tp.topic, 0) + 1

    def _table(self, table: Any) -> dict[str, int]:
        return self.tables.setdefault(table.name, {"keys_retrieved": 0, "keys_updated": 0, "keys_deleted": 0})

    def on_table_get(self, table: Any, key: Any) -> None:
        self._table(table)["keys_retrieved"] += 1

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        self._table(table)["keys_updated"] += 1

    def on_table_del(self, table: Any, key: Any) -> None:
        self._table(table)["keys_deleted"] += 1

    def on_commit_initiated(self, consumer: Any) -> Any:
        return time.monotonic()

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        self.commit_latency.append(time.monotonic() - state)

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        self.messages_sent += 1
        self.messages_sent_by_topic[topic] = self.messages_sent_by_topic.get(topic, 0) + 1
        return time.monotonic()

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        self.send_latency.append(time.monotonic() - state)

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        self.send_errors += 1

    def on_rebalance_start(self, app: Any) -> Any:
        self.rebalances += 1
        return time.monotonic()

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        self.rebalance_end_latency.append(time.monotonic() - state)

    def asdict(self) -> dict[str, Any]:
        def avg(values: deque[float]) -> float:
            return sum(values) / len(values) if values else 0.0

        return {
            "messages_received_total": self.messages_received_total,
            "messages_received_by_topic": dict(self.messages_received_by_topic),
            "events_total": self.events_total, "events_active": self.events_active,
            "events_by_stream": dict(self.events_by_stream), "events_runtime_avg": avg(self.events_runtime),
            "tables": {name: dict(counts) for name, counts in self.tables.items()},
            "commit_latency_avg": avg(self.commit_latency), "send_latency_avg": avg(self.send_latency),
            "messages_sent": self.messages_sent, "messages_sent_by_topic": dict(self.messages_sent_by_topic),
            "send_errors": self.send_errors, "topic_buffer_full": dict(self.topic_buffer_full),
            "rebalances": self.rebalances, "rebalance_end_latency_avg": avg(self.rebalance_end_latency),
        }
