# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""The confluent consumer runs group operations (pause, resume, seek, commit) on its fetch thread,
in the order they were asked, whether they run after a fetch or inline while a rebalance
callback blocks that thread. A pause queued behind a fetch and a resume asked inline during
the rebalance that fetch ran into once ran resume-then-pause: the partition stayed paused for
good (a chaos run with 20 SIGKILLs on Apache Kafka stalled that way)."""
from __future__ import annotations

import asyncio
import threading

from streamkit import Settings
from streamkit.transport.base import TP
from streamkit.transport.confluent_driver import ConfluentConsumer


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def pause(self, parts):
        self.calls.append(("pause", [p.partition for p in parts]))

    def resume(self, parts):
        self.calls.append(("resume", [p.partition for p in parts]))


async def test_a_pause_queued_behind_a_fetch_runs_before_a_resume_asked_during_its_rebalance():
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), "group")
    consumer._loop = asyncio.get_running_loop()
    client = consumer._client = RecordingClient()
    fetching, fetch_done = threading.Event(), threading.Event()
    consumer._fetch_pool.submit(lambda: (fetching.set(), fetch_done.wait(10)))  # a fetch in progress
    assert await asyncio.to_thread(fetching.wait, 10)
    consumer.pause([TP("t", 0)])  # queued: runs after the fetch
    consumer._rebalancing = True  # the fetch ran into a rebalance; its callback now blocks the thread
    consumer.resume([TP("t", 0)])  # asked during the callback: runs inline
    fn, result = consumer._inline_calls.get_nowait()  # what the callback's loop runs
    consumer._run_inline(consumer._loop, fn, result)
    consumer._rebalancing = False
    fetch_done.set()
    await asyncio.to_thread(consumer._fetch_pool.submit(lambda: None).result, 10)  # the pool's turn ran
    assert client.calls == [("pause", [0]), ("resume", [0])]
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()


async def test_an_awaited_group_call_gets_its_result_in_order_after_queued_ones():
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), "group")
    consumer._loop = asyncio.get_running_loop()
    client = consumer._client = RecordingClient()
    consumer.pause([TP("t", 1)])
    value = await consumer._on_fetch_thread(lambda: client.calls.append(("seek", [1])) or "sought")
    assert value == "sought"
    assert client.calls == [("pause", [1]), ("seek", [1])]
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()


class LateMetadataClient:
    """librdkafka's answer while a fresh client has no metadata for the topic yet (a restore's
    consumer started as the broker came back from an outage): "Local: Unknown partition"."""

    def __init__(self, unknown_for: int) -> None:
        self.unknown_for = unknown_for
        self.calls = 0

    def get_watermark_offsets(self, part, timeout=None):
        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        if self.calls <= self.unknown_for:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, "Failed to get watermark offsets"))
        return (0, 42)

    def list_topics(self, topic=None, timeout=None):
        """The broker answers, and its metadata has no such partition."""
        from types import SimpleNamespace

        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={})})


async def fails_as_unknown(consumer: ConfluentConsumer, tp: TP) -> None:
    """``end_offsets`` of ``tp`` ends in librdkafka's "Unknown partition"; the consumer is closed."""
    try:
        await consumer.end_offsets([tp])
        raise AssertionError(f"{tp} must fail in the end: the broker does not have it")
    except Exception as exc:
        assert "Unknown partition" in str(exc) or "_UNKNOWN_PARTITION" in str(exc), exc
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()


async def test_end_offsets_wait_for_the_metadata_of_a_partition_the_client_does_not_know_yet():
    """A table restore asked for its changelog's ends a moment after a broker outage, got
    "Unknown partition" and halted the worker (the frozen-broker chaos run on Apache Kafka)."""
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), None)
    consumer._client = client = LateMetadataClient(unknown_for=3)
    assert await consumer.end_offsets([TP("t-changelog", 0)]) == {TP("t-changelog", 0): 42}
    assert client.calls == 4
    consumer._client = LateMetadataClient(unknown_for=10**6)  # a partition that never appears: bounded
    consumer.METADATA_WAIT = 0.3
    await fails_as_unknown(consumer, TP("t-changelog", 0))


class BrokerAwayClient(LateMetadataClient):
    """A fresh client during a broker outage: the partition stays unknown, and a metadata request
    fails too ("all brokers down"), for ``away_for`` probes; then the broker is back."""

    def __init__(self, away_for: int, partitions: int = 1) -> None:
        super().__init__(unknown_for=10**6)
        self.away_for, self.partitions, self.probes = away_for, partitions, 0

    def list_topics(self, topic=None, timeout=None):
        from types import SimpleNamespace

        from confluent_kafka import KafkaError, KafkaException

        self.probes += 1
        if self.probes <= self.away_for:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
        self.unknown_for = 0  # the metadata arrived: the next watermark call answers
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=dict.fromkeys(range(self.partitions)))})

    def get_watermark_offsets(self, part, timeout=None):
        if self.unknown_for == 0:
            return (0, 42)
        return super().get_watermark_offsets(part, timeout)


async def test_end_offsets_wait_out_an_outage_longer_than_the_metadata_wait():
    """A worker assigned as the broker went away restored its table from a fresh client whose
    metadata never came: after METADATA_WAIT the "Unknown partition" halted it (the outage-45 s
    chaos run on Apache Kafka 4.1, aiokafka, at-least-once: died=1). While the broker cannot be
    reached the wait goes on; a partition the broker does not have still fails."""
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), None)
    consumer.METADATA_WAIT = 0.2
    consumer._client = client = BrokerAwayClient(away_for=3)
    assert await consumer.end_offsets([TP("t-changelog", 0)]) == {TP("t-changelog", 0): 42}
    assert client.probes == 4
    consumer._client = LateMetadataClient(unknown_for=10**6)  # reachable, no such partition
    await fails_as_unknown(consumer, TP("t-changelog", 3))


class StaleLeaderClient(LateMetadataClient):
    """Right after a frozen broker came back: "Not leader for partition" until the client's
    metadata refresh finds the leader."""

    def get_watermark_offsets(self, part, timeout=None):
        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        if self.calls <= self.unknown_for:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "Failed to get watermark offsets"))
        return (0, 42)


async def test_end_offsets_wait_while_the_client_looks_for_the_partitions_leader():
    """A worker restoring its table as a frozen broker came back halted on "Not leader for
    partition" (the freeze-45 s chaos run on Apache Kafka 4.1, confluent, at-least-once:
    died=1). The leader is found by the next metadata refresh: wait for it."""
    consumer = ConfluentConsumer(Settings(broker="127.0.0.1:9"), None)
    consumer._client = client = StaleLeaderClient(unknown_for=3)
    assert await consumer.end_offsets([TP("t-changelog", 0)]) == {TP("t-changelog", 0): 42}
    assert client.calls == 4
    consumer._fetch_pool.shutdown()
    consumer._call_pool.shutdown()


async def test_a_restore_waits_while_librdkafka_says_all_brokers_are_down():
    """The outage-45 s chaos run (Apache Kafka 4.1, aiokafka, at-least-once) halted a restoring
    worker on "Local: All broker connections are down" from get_watermark_offsets: librdkafka
    does not flag it retriable, so the wait for the broker gave up at once."""
    from confluent_kafka import KafkaError, KafkaException

    from streamkit.transport.base import is_retriable, retry_while_unreachable

    calls = []

    async def ends():
        calls.append(1)
        if len(calls) <= 2:
            raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN, "All broker connections are down"))
        return 42

    assert is_retriable(KafkaException(KafkaError(KafkaError._TIMED_OUT, "request timed out")))
    assert not is_retriable(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied")))
    assert await retry_while_unreachable(ends, "changelog end offsets") == 42
    assert len(calls) == 3
