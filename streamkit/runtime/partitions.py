"""One source partition's state on this worker, in one object.

What the worker knows about a partition it reads — how far it was handed to the streams, where
a rewind goes back to, whether a revocation is stopping it, what the checkpoint committed, the
seek it waits for, who paused it, the dead letters waiting for its offset — used to sit in ten
dictionaries in as many modules, each forgotten at its own moment. The moments did not always
line up (a rewind forgetting one map but not the next, an assignment clearing one revocation
flag but not another), and those were bugs. Kafka Streams' ``StreamTask`` owns its partitions'
state for the same reason: here each change of ownership is a method of :class:`SourcePartition`,
and the router, checkpoint, pause ledger and rebalance handler all read one object.

:class:`SourcePartitions` is the registry the :class:`~streamkit.runtime.tasks.TaskManager` owns;
an entry lives as long as the worker (a partition's rewind count must outlive its forgetting:
a batch still being delivered when it was rewound compares against it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..transport.base import TP, Message


@dataclass(eq=False, slots=True)
class SourcePartition:
    """A source partition as this worker reads it, from assignment to release."""

    tp: TP
    delivered: int | None = None  # the offset after the last batch in every subscriber's inbox
    first_delivered: int | None = None  # the first offset handed out since assignment or rewind
    rewinds: int = 0  # a batch whose delivery spans a rewind of its partition is not counted
    revoking: bool = False  # revoked, not forgotten yet: nothing more is handed out
    committed: int | None = None  # the checkpoint's last commit (None: none since assignment)
    released: int | None = None  # its progress as it was given up (the final checkpoint's offset)
    pending_seek: int | None = None  # a rewind's target, applied by the consume loop
    pause_reasons: set[str] = field(default_factory=set)  # read again once empty
    held_letters: list[tuple[Message, Any]] = field(default_factory=list)  # exactly-once: DeadLetters

    # -- the moments of its life ------------------------------------------------------------

    def assigned(self) -> None:
        """Owned afresh: whatever cut a revocation short is over; it starts at the committed
        offset, not where it was given up."""
        self.revoking = False
        self.released = None

    def revoke(self) -> None:
        """Hand out none of its records until :meth:`forget`."""
        self.revoking = True

    def forget(self) -> None:
        """Given up (or rewound): nothing of it is in flight any more."""
        self.delivered = None
        self.first_delivered = None
        self.revoking = False
        self.held_letters.clear()

    def rewind_target(self) -> int | None:
        """Where a rewind reads it again from: the last commit, or with none yet the first
        record handed out since its assignment."""
        return self.committed if self.committed is not None else self.first_delivered

    def rewind(self) -> int | None:
        """Go back to :meth:`rewind_target`: its queued records are dropped (the router stops them
        first), a batch of it being delivered now is stale. Returns the target."""
        target = self.rewind_target()
        self.forget()
        self.rewinds += 1
        return target

    def release(self, progress: int | None) -> None:
        """Given up by the checkpoint with ``progress`` processed (None: nothing handed out)."""
        if progress is not None:
            self.released = progress
        self.committed = None


class SourcePartitions:
    """Every source partition this worker has read, by topic partition."""

    def __init__(self) -> None:
        self._by_tp: dict[TP, SourcePartition] = {}
        self.seeking: set[TP] = set()  # those with a pending seek (the consume loop asks per batch)

    def __getitem__(self, tp: TP) -> SourcePartition:
        state = self._by_tp.get(tp)
        if state is None:
            state = self._by_tp[tp] = SourcePartition(tp)
        return state

    def get(self, tp: TP) -> SourcePartition | None:
        return self._by_tp.get(tp)

    def __iter__(self) -> Iterator[SourcePartition]:
        return iter(list(self._by_tp.values()))

    def each(self, tps: Iterable[TP]) -> list[SourcePartition]:
        return [self[tp] for tp in tps]

    # -- views for the checkpoint, metrics and diagnostics -----------------------------------

    def delivered(self) -> dict[TP, int]:
        return {s.tp: s.delivered for s in self._by_tp.values() if s.delivered is not None}

    def committed(self) -> dict[TP, int]:
        return {s.tp: s.committed for s in self._by_tp.values() if s.committed is not None}

    def released(self) -> dict[TP, int]:
        return {s.tp: s.released for s in self._by_tp.values() if s.released is not None}

    def reading(self) -> list[TP]:
        """Partitions with a batch delivered or being delivered since their assignment (or last
        rewind): those a roll-back sends back."""
        return sorted(s.tp for s in self._by_tp.values() if s.first_delivered is not None)

    def revoking(self) -> list[TP]:
        return sorted(s.tp for s in self._by_tp.values() if s.revoking)

    def paused(self) -> dict[TP, set[str]]:
        return {s.tp: set(s.pause_reasons) for s in self._by_tp.values() if s.pause_reasons}

    def seek_later(self, tp: TP, offset: int) -> None:
        """Read ``tp`` from ``offset`` after the current fetch (what it returns of ``tp`` is dropped)."""
        self[tp].pending_seek = offset
        self.seeking.add(tp)

    def take_seeks(self, tps: Iterable[TP] | None = None) -> dict[TP, int]:
        """The pending seeks (of ``tps``, or all), each taken once."""
        seeks = {}
        for tp in list(self.seeking) if tps is None else [tp for tp in tps if tp in self.seeking]:
            state = self._by_tp[tp]
            assert state.pending_seek is not None
            seeks[tp], state.pending_seek = state.pending_seek, None
            self.seeking.discard(tp)
        return seeks
