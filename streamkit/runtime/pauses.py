"""Why each partition is paused. Several parts of a worker stop reading a partition for reasons of
their own: the previous owners are not fenced yet, its tables are recovering, a join holds enough
of it while the other side catches up. Each pauses and resumes for its reason only; the consumer
reads a partition again once no reason holds it. Without this, one part's resume undoes
another's pause (a join resuming a partition whose table is still recovering).
"""
from __future__ import annotations

from typing import Any, Iterable

from ..transport.base import TP
from .partitions import SourcePartitions


class PauseLedger:
    """The reasons holding each paused partition (kept with the partition's state); pauses and
    resumes the consumer accordingly."""

    def __init__(self, consumer: Any, partitions: SourcePartitions) -> None:
        self.consumer = consumer
        self.partitions = partitions

    def hold(self, reason: str, tps: Iterable[TP]) -> None:
        newly = []
        for state in self.partitions.each(tps):
            if not state.pause_reasons:
                newly.append(state.tp)
            state.pause_reasons.add(reason)
        if newly:
            self.consumer.pause(newly)

    def release(self, reason: str, tps: Iterable[TP]) -> None:
        freed = []
        for tp in tps:
            state = self.partitions.get(tp)
            if state is None or reason not in state.pause_reasons:
                continue
            state.pause_reasons.discard(reason)
            if not state.pause_reasons:
                freed.append(tp)
        if freed:
            self.consumer.resume(freed)

    def release_all(self, reason: str) -> None:
        """``reason``'s every hold (its owner starts over)."""
        self.release(reason, [s.tp for s in self.partitions if reason in s.pause_reasons])

    def holds(self, reason: str, tp: TP) -> bool:
        state = self.partitions.get(tp)
        return state is not None and reason in state.pause_reasons

    @property
    def reasons(self) -> dict[TP, set[str]]:
        """Each paused partition's reasons (a copy: for reading)."""
        return self.partitions.paused()

    def forget(self, tps: Iterable[TP]) -> None:
        """A new assignment of ``tps`` reads from the start, unpaused (as every Kafka client does):
        the reasons of the old one are gone with it."""
        for tp in tps:
            state = self.partitions.get(tp)
            if state is not None:
                state.pause_reasons.clear()
