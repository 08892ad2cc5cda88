"""The running worker as topics, tables, joins and web views use it: one narrow object handed down.

Those layers used to reach the worker through ``app.runtime`` (the whole :class:`Runtime`, typed
``Any``): a topic's send climbed to ``app.runtime.producer``, a table's ownership check to
``app.runtime.partition_count``, a join's wait to ``runtime.router.delivered_to`` and
``runtime.consumer``. Quix Streams hands a ``ProcessingContext`` down instead, and so does this:
the :class:`~streamkit.app.App` makes one context for its life and gives it to every topic and
table it makes (``app.processing``); it is bound to each worker the app starts (or plans a
topology with) from its start until it has stopped (its final checkpoint still uses it).
Between runs every member reads "not running" (``None``, nothing assigned).

Only what those layers need is here, typed; what the worker keeps to itself (the checkpoint, the
task manager, the rebalance handler) is not reachable through it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..transport import Consumer, Producer
    from ..transport.base import TP
    from .dead_letters import ErrorPolicy
    from .inbox import Subscriber
    from .membership import Membership
    from .pauses import PauseLedger
    from .tasks import TaskShard


class Worker(Protocol):
    """What a bound context reads from the worker (runtime/worker.py's ``Runtime``)."""

    @property
    def producer(self) -> Producer: ...
    @property
    def consumer(self) -> Consumer | None: ...
    @property
    def pauses(self) -> PauseLedger | None: ...
    @property
    def membership(self) -> Membership | None: ...
    @property
    def errors(self) -> ErrorPolicy: ...
    @property
    def assigned(self) -> set[TP]: ...
    @property
    def partition_counts(self) -> dict[str, int]: ...
    @property
    def fetch_rounds(self) -> int: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def rebalances(self) -> int: ...
    @property
    def planning(self) -> bool: ...
    def subscribe(self, topic: object, subscriber: Subscriber) -> None: ...
    def register_task_shard(self, shard: TaskShard) -> None: ...
    def partition_count(self, topic: str) -> int: ...
    def delivered_to(self, tp: TP) -> int | None: ...
    async def fail(self, exc: BaseException) -> None: ...
    async def wait_stable_offsets(self, tps: list[TP]) -> None: ...


_NOTHING: frozenset[TP] = frozenset()


class ProcessingContext:
    """The worker an app runs on, as the layers above the runtime see it (unbound: not running)."""

    __slots__ = ("_worker",)

    def __init__(self) -> None:
        self._worker: Worker | None = None

    def bind(self, worker: Worker) -> None:
        """``worker`` runs the app from now on (one at a time: a second start is refused earlier)."""
        if self._worker is not None and self._worker is not worker:
            raise RuntimeError("this app's processing context is bound to another running worker")
        self._worker = worker

    def unbind(self, worker: Worker) -> None:
        if self._worker is worker:
            self._worker = None

    @property
    def running(self) -> bool:
        return self._worker is not None

    # -- outputs ------------------------------------------------------------------------------

    @property
    def producer(self) -> Producer | None:
        """The worker's producer (under exactly-once it routes each send to the transaction of
        the record being processed); None while not running or before it is started."""
        worker = self._worker
        return worker.producer if worker is not None else None

    @property
    def errors(self) -> ErrorPolicy | None:
        """The error policy: dead-letter topic, or what the app chose."""
        return self._worker.errors if self._worker is not None else None

    # -- what this worker reads -----------------------------------------------------------------

    def subscribe(self, topic: object, subscriber: Subscriber) -> None:
        """Queue ``topic``'s records for ``subscriber`` (an agent's stream; before the topology
        is frozen, as the agents start)."""
        self._running().subscribe(topic, subscriber)

    def register_task_shard(self, shard: TaskShard) -> None:
        """``shard`` keeps state of the tasks' partitions: the task manager drives its forgetting
        at each revocation, loss, fence and rewind (runtime/tasks.py)."""
        self._running().register_task_shard(shard)

    @property
    def planning(self) -> bool:
        """The worker runs only to freeze the topology (runtime/planning.py): nothing is read."""
        return self._worker.planning if self._worker is not None else False

    @property
    def consumer(self) -> Consumer | None:
        return self._worker.consumer if self._worker is not None else None

    @property
    def pauses(self) -> PauseLedger | None:
        """Who paused which partition (made with the consumer, which may come after a stream)."""
        return self._worker.pauses if self._worker is not None else None

    @property
    def assigned(self) -> set[TP] | frozenset[TP]:
        """The source partitions this worker owns now (read only)."""
        return self._worker.assigned if self._worker is not None else _NOTHING

    def delivered_to(self, tp: TP) -> int | None:
        """The offset after the last record of ``tp`` handed to the streams."""
        return self._worker.delivered_to(tp) if self._worker is not None else None

    @property
    def fetch_rounds(self) -> int:
        """Consume-loop iterations so far: a join's wait counts the fetches it waited."""
        return self._worker.fetch_rounds if self._worker is not None else 0

    @property
    def rebalances(self) -> int:
        """Assignments handled so far (who leads is known after the first)."""
        return self._worker.rebalances if self._worker is not None else 0

    def partition_count(self, topic: str) -> int:
        """``topic``'s partitions as the worker found them (raises while not running)."""
        return self._running().partition_count(topic)

    def known_partition_count(self, topic: str) -> int | None:
        """``topic``'s partitions if the worker has counted them, else None."""
        return self._worker.partition_counts.get(topic) if self._worker is not None else None

    @property
    def membership(self) -> Membership | None:
        """Who serves which table and topic partition (web routing)."""
        return self._worker.membership if self._worker is not None else None

    # -- the worker's lifecycle -----------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._worker.stopping if self._worker is not None else False

    async def fail(self, exc: BaseException) -> None:
        """Halt the worker loudly (a fault its state cannot survive)."""
        await self._running().fail(exc)

    async def wait_stable_offsets(self, tps: list[TP]) -> None:
        """Until no previous owner's transaction is pending on ``tps`` (exactly-once recovery)."""
        await self._running().wait_stable_offsets(tps)

    def _running(self) -> Worker:
        worker = self._worker
        if worker is None:
            raise RuntimeError("the app is not running a worker")
        return worker
