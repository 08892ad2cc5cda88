"""The error policy: what happens to a record that cannot be decoded or keeps failing.

``dlq`` sends the original bytes to the dead-letter topic with the error and the source
coordinates in headers; ``skip`` logs and moves on; ``stop`` halts the worker. Nothing is
dropped without a log line; logs are rate-limited so a flood of bad records cannot stall a worker
(runtime/burst_log.py: what a burst held back is reported when its window ends).
"""
from __future__ import annotations

import logging
from typing import Awaitable, Callable

from ..errors import WorkerStopped
from ..transport.base import TP, Message, Producer
from .burst_log import BurstLog
from .partitions import SourcePartition, SourcePartitions

log = logging.getLogger("streamkit.errors")

HEADER_ERROR = "streamkit-error"
HEADER_ERROR_TYPE = "streamkit-error-type"
HEADER_STAGE = "streamkit-stage"
HEADER_TOPIC = "streamkit-source-topic"
HEADER_PARTITION = "streamkit-source-partition"
HEADER_OFFSET = "streamkit-source-offset"
HEADER_APP = "streamkit-app"


def dead_letter_headers(message: Message, error: BaseException, stage: str, app_id: str) -> list[tuple[str, bytes]]:
    """The original headers plus why and where the record failed (the worker and Spark share this)."""
    return list(message.headers) + [
        (HEADER_ERROR, str(error).encode()[:4096]),
        (HEADER_ERROR_TYPE, type(error).__name__.encode()),
        (HEADER_STAGE, stage.encode()),
        (HEADER_TOPIC, message.topic.encode()),
        (HEADER_PARTITION, str(message.partition).encode()),
        (HEADER_OFFSET, str(message.offset).encode()),
        (HEADER_APP, app_id.encode()),
    ]


DeadLetter = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]  # key, value, headers


class ErrorPolicy:
    """Applies the configured policy; counts what it did for metrics and tests.

    ``judge`` is the decision, shared by the worker and Spark tasks (they differ only in where a
    dead letter goes: the worker's producer, or the task's output rows); ``handle`` is the
    worker's: it sends the dead letter, or halts the worker."""

    def __init__(self, policy: str, app_id: str, dlq_topic: str, producer: Callable[[], Producer] | None = None,
                 on_stop: Callable[[BaseException], Awaitable[None]] | None = None) -> None:
        self.policy = policy
        self.app_id = app_id
        self.dlq_topic = dlq_topic
        self._producer = producer
        self._on_stop = on_stop
        self.counts = {"dlq": 0, "skip": 0}
        self._log_lines = BurstLog(log)

    def _log(self, stage: str, message: Message, error: BaseException) -> None:
        self._log_lines.error("%s failed for %s[%d]@%d, policy=%s: %s: %s", stage, message.topic,
                              message.partition, message.offset, self.policy, type(error).__name__, error)

    def judge(self, stage: str, message: Message, error: BaseException) -> DeadLetter | None:
        """Log (rate-limited) and count one failed record; return its dead letter under ``dlq``,
        None under ``skip``; raise WorkerStopped under ``stop``."""
        self._log(stage, message, error)
        if self.policy == "stop":
            raise WorkerStopped(
                f"{stage} failed for {message.topic}[{message.partition}]@{message.offset} and "
                f"error_policy=stop: {type(error).__name__}: {error}"
            )
        if self.policy == "skip":
            self.counts["skip"] += 1
            return None
        self.counts["dlq"] += 1
        return message.key, message.value, dead_letter_headers(message, error, stage, self.app_id)

    async def decide(self, stage: str, message: Message, error: BaseException) -> DeadLetter | None:
        """``judge`` in the worker: under ``stop`` it halts the worker (and raises WorkerStopped)."""
        try:
            return self.judge(stage, message, error)
        except WorkerStopped as stopped:
            if self._on_stop is not None:
                await self._on_stop(stopped)
            raise

    async def send(self, letter: DeadLetter) -> None:
        assert self._producer is not None, "a worker's error policy has its producer"
        key, value, headers = letter
        await self._producer().send(self.dlq_topic, key, value, headers=headers, track=False)

    async def handle(self, stage: str, message: Message, error: BaseException) -> None:
        """Deal with one failed record in the worker. Raises WorkerStopped under ``stop``."""
        letter = await self.decide(stage, message, error)
        if letter is not None:
            await self.send(letter)


class HeldDeadLetters:
    """Exactly-once: the dead letters of records that failed to decode, held with their partition
    (:class:`~streamkit.runtime.partitions.SourcePartition`) until a checkpoint commits an offset
    past their records.

    A record fails to decode when its batch is delivered, ahead of the agent. Sent then, its dead
    letter joined the next transaction, whose offset stops at the first record the agent has not
    processed: committed without its record's offset, it was made again by whoever read the
    partition again from there (a rebalance's next owner, a rollback, a restart). Held letters of
    a partition that is rewound or given up are dropped with its queued records."""

    def __init__(self, partitions: SourcePartitions) -> None:
        self.partitions = partitions

    def add(self, partition: SourcePartition, message: Message, letter: DeadLetter) -> None:
        partition.held_letters.append((message, letter))

    def due(self, offsets: dict[TP, int]) -> list[tuple[Message, DeadLetter]]:
        """Take the letters of records below ``offsets`` (per partition, in offset order)."""
        taken: list[tuple[Message, DeadLetter]] = []
        for tp, end in offsets.items():
            state = self.partitions.get(tp)
            if state is None or not state.held_letters:
                continue
            held = state.held_letters
            cut = 0
            while cut < len(held) and held[cut][0].offset < end:
                cut += 1
            taken.extend(held[:cut])
            del held[:cut]
        return taken

    def __len__(self) -> int:
        return sum(len(state.held_letters) for state in self.partitions)
