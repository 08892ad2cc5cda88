"""Columnar agents on Spark: the same ``def fn(batch)`` (agents/columnar.py) as a ``mapInArrow``
stage. Each Arrow batch of the source's rows becomes the records it holds, decoded into the
function's input batch as the worker decodes a fetched batch; the outputs and dead letters are
the task's sink rows, written exactly once by the sink like any agent's (spark/sink.py).
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from .agents import BEFORE_ANY_RECORD, AgentRun, SinkRows, _where, messages_of
from .task_errors import task_failed


class ColumnarTask:
    """The ``mapInArrow`` function of a columnar agent (pickled to tasks: names, not objects)."""

    def __init__(self, app_spec: str, agent_name: str) -> None:
        self.app_spec, self.agent_name = app_spec, agent_name

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            run = AgentRun(self.app_spec, self.agent_name)
        except Exception as exc:
            raise task_failed(self.agent_name, BEFORE_ANY_RECORD, exc) from exc
        columnar = run.agent.columnar
        assert columnar is not None  # the facade runs columnar agents only through this
        retries, no_retry = run.app.conf.agent_retries, run.agent.no_retry_types()
        stage = f"agent {self.agent_name}"
        for batch in batches:
            try:
                messages = messages_of(batch)
                if messages:
                    records, kept, failures = columnar.decode(messages)
                    for i, error in failures:
                        run.failed("decode", messages[i], error)
                    if records.num_rows:
                        outputs, failing = columnar.apply(records, retries=retries, no_retry=no_retry)
                        for topic, key, value in outputs:
                            run.out.add(topic, key, value)
                        for i, error in failing:
                            run.failed(stage, messages[kept[i]], error)
            except Exception as exc:  # the policy's stop, or streamkit's own failure
                raise task_failed(self.agent_name, _where(batch), exc) from exc
            yield run.out.batch()
            run.out = SinkRows()
