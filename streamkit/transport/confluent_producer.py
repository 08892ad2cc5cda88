"""The librdkafka producer: sends never wait per record; delivery reports are resolved on the
event loop in batches, served by one poller thread or, right after a batch of sends, by the loop
itself; transactions (EOS v2) run their blocking calls off the loop, each retried once at most,
so a stuck call ends in an abort rather than a hang."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as CKProducer

from ..errors import GroupFenced, ProducerFenced, TransactionAborted
from ..settings import Settings, reveal_config
from .auth_errors import LIBRDKAFKA_FAILURES, librdkafka_logger
from .base import TP, Producer, retry_while_unreachable
from .pending import DeliveryFailed, PendingDeliveries, delivery_failed
from .security import compression, confluent_common

log = logging.getLogger("streamkit.confluent")
_PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)
FLUSH_STEP = 5.0  # seconds per blocking flush call (a cancelled flush frees its thread this soon)
TXN_CALL_GRACE = 30.0  # seconds past its own timeout before a transactional call is given up as hung
# seconds the poller thread leaves delivery reports to the event loop after it last served them
# (after a batch of sends: ``_serve_reports``); past that, with the loop sending nothing, it serves them again
LOOP_SERVES_FOR = 0.02


class ConfluentProducer(Producer):
    def __init__(self, settings: Settings, **overrides: Any) -> None:
        conf = confluent_common(settings)
        conf["logger"] = librdkafka_logger  # through Python logging: -l governs it, rate limited
        conf.update(
            {
                "acks": settings.acks,
                "linger.ms": settings.linger_ms,
                "compression.type": compression(settings) or "none",
                "partitioner": "murmur2_random",  # Java-compatible key placement
                # librdkafka's producer default is true: a send to a missing topic would have the
                # broker create it with its own partition count; the app creates topics it sends
                # to with its settings before their first send (runtime/topic_creation.py)
                "allow.auto.create.topics": False,
            }
        )
        conf.update(reveal_config(settings.producer_config))
        transactional_id = overrides.pop("transactional_id", None)
        if transactional_id:
            conf["transactional.id"] = transactional_id
            conf["transaction.timeout.ms"] = settings.transaction_timeout_ms
        conf.update(overrides)
        self._conf = conf
        self._client: CKProducer | None = None
        self._pending = PendingDeliveries()
        self._reports: list[tuple[asyncio.Future[Any], Any, Any]] = []
        self._reports_lock = threading.Lock()
        # untracked sends since the last flush; a transactional producer's are not reported one by one
        self._count_type = UnreportedCount if transactional_id else DeliveryCount
        self._count = self._count_type()
        self._settling: list[DeliveryCount] = []  # counts a flush waits for
        self._stop = threading.Event()
        self._loop_served_at = float("-inf")  # time.monotonic() of the loop's last _serve_reports
        # held by whichever thread serves reports now (the poller, or the loop after its sends):
        # never both at once, so no two threads run the delivery callbacks together
        self._serving = threading.Lock()
        self._poller: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._txn_in_flight: asyncio.Future[Any] | None = None
        self._txn_hung = False  # a transactional call never returned: every later one fails at once

    @property
    def client(self) -> CKProducer:
        assert self._client is not None, "producer not started"
        return self._client

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._client = CKProducer(self._conf)
        self._poller = threading.Thread(target=self._poll_forever, name="streamkit-delivery", daemon=True)
        self._poller.start()

    def _poll_forever(self) -> None:
        while not self._stop.is_set():
            left = self._loop_served_at + LOOP_SERVES_FOR - time.monotonic()
            if left > 0:  # the loop serves them after each batch it sends: no GIL hand-over a report here
                self._stop.wait(left)
                continue
            try:
                with self._serving:
                    served = self.client.poll(0.05)
            except KafkaException as exc:  # a fatal error (fenced): the next transactional call says so
                log.debug("producer poll: %s", exc)
                if exc.args and isinstance(exc.args[0], KafkaError) and exc.args[0].fatal():
                    return
                continue
            if served and self._loop is not None:
                try:
                    self._loop.call_soon_threadsafe(self._resolve_reports)
                except RuntimeError:  # loop closed during shutdown
                    return

    def _resolve_reports(self) -> None:
        with self._reports_lock:
            reports, self._reports = self._reports, []
        for fut, err, msg in reports:
            if fut.done():
                continue
            if err is not None and err.code() in _PURGED:
                fut.cancel()  # rolled back with its transaction, not a delivery failure
            elif err is not None:
                fut.set_exception(KafkaException(err))
            else:
                fut.set_result((msg.partition(), msg.offset()))
        for count in self._settling:
            count.wake()

    async def stop(self) -> None:
        if self._client is None:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._client.flush, 30)
        self._stop.set()
        if self._poller is not None:
            await loop.run_in_executor(None, self._poller.join, 5)
        self._resolve_reports()

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
        track: bool = True,
    ) -> asyncio.Future[Any] | None:
        assert self._loop is not None
        if not track:  # counted by try_send; a flush while the buffer is full leaves it to the next
            while not self.try_send(topic, key, value, partition, headers, timestamp):
                await asyncio.sleep(0.005)  # local queue full: let the poller drain deliveries
            return None
        fut = self._loop.create_future()

        def delivered(err: Any, msg: Any) -> None:  # runs in the poller thread
            with self._reports_lock:
                self._reports.append((fut, err, msg))

        args = (topic, value, key, -1 if partition is None else partition, delivered, None, timestamp or 0,
                headers or None)  # by position, as try_send
        while True:
            try:
                self.client.produce(*args)  # type: ignore[arg-type]  # the stub's headers: an invariant list of (str, str | bytes | None)
                break
            except BufferError:  # local queue full: let the poller drain deliveries
                await asyncio.sleep(0.005)
            except KafkaException as exc:
                raise self._explained(exc) from exc
        self._pending.add(fut, topic)
        return fut

    def try_send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None,
                 headers: list[tuple[str, bytes]] | None = None, timestamp: int | None = None) -> bool:
        """The hot path of untracked sends: one librdkafka call, no coroutine. Arguments go by
        position (``produce(topic, value, key, partition, callback, on_delivery, timestamp,
        headers)``), as a keyword made the call cost 1.2-1.5 µs instead of 0.8-0.9."""
        count = self._count
        client = self._client
        assert client is not None, "producer not started"
        count.sent += 1
        try:
            if headers or timestamp is not None:
                client.produce(topic, value, key, -1 if partition is None else partition, count.on_delivery,
                               None, timestamp or 0, headers or None)  # type: ignore[arg-type]  # as in send
            else:
                client.produce(topic, value, key, -1 if partition is None else partition, count.on_delivery)
        except BufferError:  # local queue full: the caller takes the waiting path
            count.sent -= 1
            return False
        except KafkaException as exc:
            count.sent -= 1
            raise self._explained(exc) from exc
        return True

    def try_send_many(self, records: Sequence[tuple[str, bytes | None, bytes | None]]) -> int:
        """``try_send`` over many records with the lookups made once: librdkafka's produce
        is then most of the cost of a record (0.55 µs; the loop of ``try_send`` calls added
        ~0.2 µs a record to a columnar agent's batch)."""
        count = self._count
        client = self._client
        assert client is not None, "producer not started"
        produce, on_delivery = client.produce, count.on_delivery
        count.sent += len(records)  # before any report can come; what did not go is taken back below
        sent = 0
        try:
            for topic, key, value in records:
                produce(topic, value, key, -1, on_delivery)
                sent += 1
        except BufferError:  # local queue full: the caller sends the rest the waiting way
            pass
        except KafkaException as exc:
            raise self._explained(exc) from exc
        finally:  # whatever stopped the loop, the flush waits for the records librdkafka took only
            count.sent -= len(records) - sent
        self._serve_reports()
        return sent

    def _serve_reports(self) -> None:
        """Serve the delivery reports librdkafka has ready, here on the event loop's thread,
        without waiting, and keep the poller thread out of it for ``LOOP_SERVES_FOR``. The
        poller takes the GIL back for every report it serves: while the loop is busy, that is a
        GIL hand-over a record, and the loop sat idle a third of a columnar agent's run (served
        here after each batch's sends instead: 1.26x its throughput in 3 alternating pairs;
        benchmarks/README.md). The poller still serves whatever comes while the loop sends nothing."""
        self._loop_served_at = time.monotonic()
        if not self._serving.acquire(blocking=False):
            return  # the poller is serving them now
        try:
            served = self.client.poll(0)
        except KafkaException as exc:  # a fatal error (fenced): the poller and the next transactional call say so
            log.debug("producer poll: %s", exc)
            return
        finally:
            self._serving.release()
        if served:
            self._resolve_reports()

    def _explained(self, exc: KafkaException) -> BaseException:
        """librdkafka answers every produce after a failed transaction only "Erroneous state";
        the cause (a partition it could not add: no Write ACL on the topic) is in its log
        (ADDPARTS, TXNERR lines): name it, so the worker can say what to fix."""
        err = exc.args[0] if exc.args else None
        if not isinstance(err, KafkaError) or err.code() != KafkaError._STATE or "transactional.id" not in self._conf:
            return exc
        self.client.poll(0)  # serve the log queue here: the poller thread may not have read the line yet
        lines = [line for line in reversed(LIBRDKAFKA_FAILURES) if " to transaction" in line]
        cause = next((line for line in lines if 'add partition "' in line), lines[0] if lines else None)
        if cause is None:
            return exc
        return TransactionAborted(f"{err.str()}; the transaction had failed: {cause}")

    async def flush(self) -> None:
        """Every record sent before this call acknowledged or failed; records sent meanwhile are
        the next flush's (streams need not stop while a checkpoint waits: librdkafka's own
        flush waits for an empty queue, which sends racing it keep from coming)."""
        count, self._count = self._count, self._count_type()
        if isinstance(count, UnreportedCount):
            await self._drained()
        else:
            await self._settled(count)
        await asyncio.sleep(0)  # let the poller's last call_soon_threadsafe run
        self._resolve_reports()
        errors = count.errors
        failures: list[BaseException] = [KafkaException(err) for err, _ in errors]
        topics = [topic for _, topic in errors]
        try:
            await self._pending.settle()
        except DeliveryFailed as exc:
            failures.extend(exc.failures)
            topics.extend(exc.topics)
        if failures:
            raise delivery_failed(failures, topics)

    async def _settled(self, count: "DeliveryCount") -> None:
        """Until the client has reported every record of ``count`` (within message.timeout.ms)."""
        loop = asyncio.get_running_loop()
        waited = 0.0
        self._settling.append(count)
        try:
            while not count.settled:
                if self._poller is None or not self._poller.is_alive():  # nobody serves reports: flush does
                    await loop.run_in_executor(None, self.client.flush, FLUSH_STEP)
                else:
                    count.waiter = loop.create_future()
                    try:
                        await asyncio.wait_for(count.waiter, FLUSH_STEP)
                    except TimeoutError:
                        pass
                if count.settled or len(self.client) == 0:  # nothing queued nor unreported: all served
                    break  # (the second: a report counted by two threads at once, as at stop, lost)
                waited += FLUSH_STEP
                if waited % 30 < FLUSH_STEP:
                    log.warning("%d record(s) still waiting for the broker after %.0fs",
                                count.sent - count.reported, waited)
        finally:
            self._settling.remove(count)

    async def _drained(self) -> None:
        """Until librdkafka holds no record (a transactional producer's flush: exactly-once stops
        the streams while it commits, so nothing races the drain). Failures are the commit's to
        report: librdkafka fails ``commit_transaction`` when any record of the transaction
        failed delivery."""
        loop = asyncio.get_running_loop()
        waited = 0.0
        while len(self.client) > 0:
            await loop.run_in_executor(None, self.client.flush, FLUSH_STEP)
            waited += FLUSH_STEP
            if len(self.client) > 0 and waited % 30 < FLUSH_STEP:
                log.warning("%d record(s) still waiting for the broker after %.0fs", len(self.client), waited)

    async def partitions_for(self, topic: str) -> int:
        loop = asyncio.get_running_loop()
        meta = await loop.run_in_executor(None, lambda: self.client.list_topics(topic, timeout=10))
        return len(meta.topics[topic].partitions)

    # -- transactions (librdkafka's calls block: run them off the loop) --------------------------

    async def _txn_call(self, what: str, fn: Any, *args: Any, timeout: float | None = None) -> None:
        """One transactional call (``timeout``: librdkafka's own, passed as its last argument).
        librdkafka's transactional calls are resumable: one that fails with a retriable error (a
        timeout while the broker is away) is made again until it completes, however long the
        outage. Calls never overlap: a caller cancelled while its call runs in a thread (a
        stopping worker) leaves the next call waiting for that thread, or librdkafka refuses it
        ("Simultaneous ... calls not allowed") and a later abort too. A call still running
        ``TXN_CALL_GRACE`` past its own timeout is given up as hung (librdkafka #5456/#5511: a
        coordinator request that never times out, seen after a broker restart): the transaction
        fails, and so does every later call of this producer at once, so the unit is replaced."""
        loop = asyncio.get_running_loop()
        call_args = (*args, timeout) if timeout is not None else args
        limit = (timeout or 0.0) + TXN_CALL_GRACE

        async def once() -> None:
            previous = self._txn_in_flight
            if previous is not None and not previous.done():
                if self._txn_hung:
                    raise TransactionAborted(f"{what}: an earlier transactional call of this producer never "
                                             "returned; the producer is replaced")
                await asyncio.wait({previous})
            self._txn_in_flight = call = loop.run_in_executor(None, fn, *call_args)
            try:
                done, _ = await asyncio.wait({call}, timeout=limit)
                if not done:
                    self._txn_hung = True
                    raise TransactionAborted(f"{what} did not return within {limit:.0f}s (librdkafka waits on a "
                                             "coordinator that went away); rolled back with a new producer")
                call.result()
            except KafkaException as exc:
                err = exc.args[0]
                if not isinstance(err, KafkaError):
                    raise
                if err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                                  KafkaError.INVALID_PRODUCER_EPOCH):
                    raise ProducerFenced(f"{what}: {err.str()}") from exc
                if err.code() in (KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                                  KafkaError.FENCED_INSTANCE_ID):
                    raise GroupFenced(f"{what}: {err.str()}") from exc
                if err.txn_requires_abort():
                    raise TransactionAborted(f"{what}: {err.str()}") from exc
                raise  # retriable ones are made again by retry_while_unreachable

        await retry_while_unreachable(once, what)

    async def init_transactions(self) -> None:
        await self._txn_call("init_transactions", self.client.init_transactions, timeout=60)

    async def begin_transaction(self) -> None:
        await self._txn_call("begin_transaction", self.client.begin_transaction)

    async def send_offsets_to_transaction(self, offsets: dict[TP, int], group: Any) -> None:
        parts = [TopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        await self._txn_call("send_offsets_to_transaction", self.client.send_offsets_to_transaction, parts, group,
                             timeout=10)

    async def commit_transaction(self) -> None:
        await self._txn_call("commit_transaction", self.client.commit_transaction, timeout=20)
        await self.flush()  # settles delivery futures (the commit already flushed the records)

    async def abort_transaction(self) -> None:
        await self._txn_call("abort_transaction", self.client.abort_transaction, timeout=30)
        with self._reports_lock:  # aborted records' reports (errors or not) mean nothing now
            self._reports = []
        self._count = self._count_type()  # its records' reports (purged ones) go to the old count
        self._pending.discard()


class DeliveryCount:
    """Untracked sends between two flushes: how many were sent, how many librdkafka reported,
    which of them failed. Each record's report goes to the count it was sent under, so a flush
    waits for exactly the records sent before it."""

    __slots__ = ("sent", "reported", "errors", "waiter", "on_delivery")

    def __init__(self) -> None:
        self.sent = 0
        self.reported = 0
        self.errors: list[tuple[Any, str]] = []
        self.waiter: asyncio.Future[None] | None = None
        self.on_delivery: Callable[[Any, Any], None] | None = self._delivered  # bound once, not per record

    @property
    def settled(self) -> bool:
        return self.reported >= self.sent

    def _delivered(self, err: Any, msg: Any) -> None:
        """The poller thread's report. Records purged by an abort are no failure of the next
        transaction (their reports can arrive after the abort returned): it rolled them back."""
        self.reported += 1
        if err is not None and err.code() not in _PURGED:
            self.errors.append((err, msg.topic()))

    def wake(self) -> None:
        """On the event loop, after the poller served reports."""
        waiter = self.waiter
        if waiter is not None and not waiter.done() and self.settled:
            waiter.set_result(None)


class UnreportedCount(DeliveryCount):
    """A transactional producer's untracked sends: no delivery report per record (the callback
    cost ~1.2 µs of CPU a record in the poller thread, which holds the GIL for it). Nothing is
    lost by that: librdkafka counts the transaction's failed deliveries and fails
    ``commit_transaction`` when there are any, and the flush waits for its queue to drain."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        self.on_delivery = None  # produce(..., callback=None): librdkafka makes no Python call
