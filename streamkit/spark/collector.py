"""The worker's garbage-collector setting (runtime/gc_tuning.py) for a Spark task's Python code.

A stateful task holds a whole micro-batch partition's rows, messages and events at once, and
Python's default young threshold re-scans them many times: without the setting the collector
took ~40% of a windowed agent's task and most of stage one's (benchmarks/spark_stateful_tasks.py),
where the worker it is compared with runs with it. Spark reuses its Python worker processes
across tasks, so each task's end collects what it left before the next task freezes the heap.
"""
from __future__ import annotations

import gc
from typing import Any

from ..runtime import gc_tuning


def task_started(app: Any) -> None:
    """Raise the threshold (``gc_young_threshold``, as the worker) for this task."""
    gc_tuning.acquire(app.conf.gc_young_threshold)


def task_ended(app: Any) -> None:
    """The task's garbage collected (while the start-up heap is still frozen: only the task's
    objects are walked), and the interpreter's setting back."""
    gc.collect()
    gc_tuning.release(app.conf.gc_young_threshold)
