"""Untracked sends of the aiokafka producer, a batch at a time.

``AIOKafkaProducer.send`` is a coroutine that makes a future per record; profiled on a stateless
pipeline, creating those futures alone took a quarter of the worker's CPU. Sinks and
repartitions need no per-record future (a failed delivery fails the next flush, and so the
checkpoint), so their records go into one ``BatchBuilder`` per partition, placed by streamkit's
partitioner (Java's murmur2, as aiokafka's own), and are handed to aiokafka with ``send_batch``
once full or after ``linger_ms``: one future per batch. Order within a partition is kept: one
hand-over at a time (a lock), each in queue order, and a tracked send (its own future, through
aiokafka's accumulator) first hands over everything queued before it.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Sequence

from aiokafka.structs import RecordMetadata

from ..errors import TransactionAborted
from .partitioner import default_partitioner
from .pending import PendingDeliveries

log = logging.getLogger(__name__)

# Full batches not yet handed to aiokafka, in bytes of batch capacity: past this, use send (it
# waits). 4 MiB: 256 of aiokafka's 16 KiB batches, 16 of streamkit's 256 KiB ones (more only
# held more memory: peak RSS 186-193 against 133-137 MB at 256 of those, the rate the same).
MAX_QUEUED_BYTES = 4 * 1024 * 1024


class BatchedSends:
    """Per-partition batch builders of untracked sends and the task that hands them over."""

    def __init__(self, client: Any, linger_ms: int, pending: PendingDeliveries, batch_size: int = 16384) -> None:
        self.client = client
        self.max_queued = max(1, MAX_QUEUED_BYTES // batch_size)  # full batches
        self.linger = max(0, linger_ms) / 1000
        self.pending = pending
        self.open: dict[tuple[str, int], Any] = {}  # (topic, partition) -> BatchBuilder
        self.full: deque[tuple[str, int, Any]] = deque()
        self.tracked: dict[int, list[tuple[asyncio.Future[Any], Any]]] = {}  # id(builder) -> (future, metadata)
        self.work = asyncio.Event()  # something is queued
        self.filled = asyncio.Event()  # a batch is full: no need to linger
        self.lock = asyncio.Lock()  # one hand-over at a time, so a partition's batches keep order
        self.sender: asyncio.Task[None] | None = None
        self.generation = 0  # bumped by discard(): a hand-over in progress stops
        self._partitions: dict[str, tuple[int, list[int], list[int]]] = {}  # topic -> (refresh, all, available)

    @property
    def queued(self) -> bool:
        return bool(self.open or self.full)

    def _placement(self, topic: str) -> tuple[list[int], list[int]] | None:
        """The topic's partitions (all, available) as of the last metadata refresh; None: unknown."""
        metadata = self.client.client.cluster
        refreshed = metadata._last_successful_refresh_ms  # noqa: SLF001 - aiokafka exposes no public refresh time
        known = self._partitions.get(topic)
        if known is None or known[0] != refreshed:
            everything = metadata.partitions_for_topic(topic)
            if not everything:
                return None  # aiokafka's send waits for the topic's metadata
            available = metadata.available_partitions_for_topic(topic) or ()
            known = self._partitions[topic] = (refreshed, sorted(everything), sorted(available))
        return known[1], known[2]

    def try_add(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                headers: Sequence[tuple[str, bytes]] | None, timestamp: int | None,
                future: asyncio.Future[Any] | None = None) -> bool:
        """Queue one record (``future``, when given, gets its RecordMetadata or its error); False
        when it must take ``send`` (no metadata yet, a record larger than a batch, or too many
        full batches waiting for aiokafka)."""
        if len(self.full) >= self.max_queued:
            return False
        if partition is None:
            placement = self._placement(topic)
            if placement is None:
                return False
            partition = default_partitioner(key, *placement)
        where = (topic, partition)
        builder = self.open.get(where)
        if builder is None:
            builder = self.open[where] = self.client.create_batch()
        metadata = builder.append(timestamp=timestamp, key=key, value=value, headers=headers or [])
        if metadata is None:
            if builder.record_count() == 0:
                del self.open[where]
                return False  # larger than a whole batch: aiokafka's send says why
            self.full.append((topic, partition, self.open.pop(where)))
            builder = self.open[where] = self.client.create_batch()
            metadata = builder.append(timestamp=timestamp, key=key, value=value, headers=headers or [])
            self.filled.set()
        if future is not None:
            self.tracked.setdefault(id(builder), []).append((future, metadata))
        if self.sender is None:
            self.sender = asyncio.get_running_loop().create_task(self._send_forever(), name="aiokafka-batches")
        self.work.set()
        return True

    async def _send_forever(self) -> None:
        while True:
            await self.work.wait()
            if self.linger and not self.full:
                try:  # not wait_for: in 3.11 it can swallow a cancellation that meets a set event
                    async with asyncio.timeout(self.linger):
                        await self.filled.wait()
                except TimeoutError:
                    pass  # linger_ms passed: what is open goes out as it is
            self.work.clear()
            self.filled.clear()
            try:
                await self.hand_over()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # kept for the next flush, which fails the checkpoint
                log.warning("handing batches to aiokafka failed: %r", exc)
                failed = asyncio.get_running_loop().create_future()
                failed.set_exception(exc)
                failed.exception()  # read by the flush; marked read now for a worker halting before it
                self.pending.add(failed, "")

    async def hand_over(self) -> None:
        """Give aiokafka every batch queued so far, open ones included, in order (not those
        queued while it runs: streams go on during a checkpoint's flush; the next hand-over)."""
        async with self.lock:
            for where in list(self.open):
                self.full.append((*where, self.open.pop(where)))
            generation, left = self.generation, len(self.full)
            while left and self.full and generation == self.generation:
                left -= 1
                topic, partition, builder = self.full.popleft()
                builder.close()  # it lingered here already: aiokafka sends a closed batch at once
                records = self.tracked.pop(id(builder), None)
                keep_in_metadata(self.client, topic)
                try:
                    delivered = await self.client.send_batch(builder, topic, partition=partition)
                except BaseException as exc:
                    cause = transaction_error(self.client)
                    _settle(records, None, cause or exc)
                    if cause is not None:  # aiokafka says only "not in transaction" to later sends
                        raise cause from exc
                    raise
                self.pending.add(delivered, topic)
                if records:
                    delivered.add_done_callback(lambda fut, records=records: _settle_from(records, fut))

    def discard(self) -> None:
        """An aborted transaction's records that never reached aiokafka: dropped with it."""
        self.generation += 1
        self.open.clear()
        self.full.clear()
        for records in self.tracked.values():
            _settle(records, None, TransactionAborted("the transaction was aborted before this record was sent"))
        self.tracked.clear()

    async def stop(self) -> None:
        if self.sender is not None:
            self.sender.cancel()
            await asyncio.gather(self.sender, return_exceptions=True)
            self.sender = None


def keep_in_metadata(client: Any, topic: str) -> None:
    """Have aiokafka's client refresh ``topic``'s metadata from now on. It fetches every topic
    until a send names one it does not know, then only the topics named since: a topic its first
    fetch knew was never named, so that refresh dropped it, and its batches queued then waited for
    a leader until they expired (NotLeaderForPartition after request_timeout_ms), failing the
    checkpoint. A topic already named costs a done future."""
    client.client.add_topic(topic)


def transaction_error(client: Any) -> BaseException | None:
    """The error that ended the aiokafka producer's transaction (a partition it could not add,
    e.g. no Write ACL on the topic), read from its transaction manager: aiokafka keeps it on a
    future nobody awaits and answers later sends only "Can't send messages while not in
    transaction". Reading it also spares asyncio's "exception was never retrieved"."""
    manager = getattr(client, "_txn_manager", None)
    waiter: asyncio.Future[Any] | None = manager.wait_for_transaction_end() if manager is not None else None
    if waiter is None or not waiter.done() or waiter.cancelled():
        return None
    return waiter.exception()


def _settle_from(records: list[tuple[asyncio.Future[Any], Any]], batch: asyncio.Future[Any]) -> None:
    if batch.cancelled():
        _settle(records, None, asyncio.CancelledError())
    elif batch.exception() is not None:
        _settle(records, None, batch.exception())
    else:
        _settle(records, batch.result(), None)


def _settle(records: list[tuple[asyncio.Future[Any], Any]] | None, batch: Any, error: BaseException | None) -> None:
    """Each record's future from its batch's outcome: RecordMetadata at the batch's base offset
    plus the record's own, as aiokafka's per-record futures give."""
    for future, metadata in records or ():
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
            future.exception()  # the flush reads it (PendingDeliveries); a halting worker may not
        elif batch is None:  # acks=0: no offsets come back
            future.set_result(None)
        else:
            timestamp = metadata.timestamp if batch.timestamp in (None, -1) else batch.timestamp
            future.set_result(RecordMetadata(batch.topic, batch.partition, batch.topic_partition,
                                             batch.offset + metadata.offset, timestamp, batch.timestamp_type,
                                             batch.log_start_offset))
