"""Why each partition is paused. Several parts of a worker stop reading a partition for reasons of
their own: the previous owners are not fenced yet, its tables are recovering, a join holds enough
of it while the other side catches up. Each pauses and resumes for its reason only; the consumer
reads a partition again once no reason holds it. Without this, one part's resume undoes
another's pause (a join resuming a partition whose table is still recovering).
"""
from __future__ import annotations

from typing import Any, Iterable

from ..transport.base import TP


class PauseLedger:
    """The reasons holding each paused partition; pauses and resumes the consumer accordingly."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.reasons: dict[TP, set[str]] = {}

    def hold(self, reason: str, tps: Iterable[TP]) -> None:
        newly = []
        for tp in tps:
            held = self.reasons.setdefault(tp, set())
            if not held:
                newly.append(tp)
            held.add(reason)
        if newly:
            self.consumer.pause(newly)

    def release(self, reason: str, tps: Iterable[TP]) -> None:
        freed = []
        for tp in tps:
            held = self.reasons.get(tp)
            if held is None or reason not in held:
                continue
            held.discard(reason)
            if not held:
                del self.reasons[tp]
                freed.append(tp)
        if freed:
            self.consumer.resume(freed)

    def release_all(self, reason: str) -> None:
        """``reason``'s every hold (its owner starts over)."""
        self.release(reason, [tp for tp, held in self.reasons.items() if reason in held])

    def holds(self, reason: str, tp: TP) -> bool:
        return reason in self.reasons.get(tp, ())

    def forget(self, tps: Iterable[TP]) -> None:
        """A new assignment of ``tps`` reads from the start, unpaused (as every Kafka client does):
        the reasons of the old one are gone with it."""
        for tp in tps:
            self.reasons.pop(tp, None)
