# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""A librdkafka transactional call that never returns is given up, so the unit is replaced.

librdkafka's ``send_offsets_to_transaction`` can block past its own timeout for good when the
group coordinator it cached went away (librdkafka issues #5456, #5511). The Kafka chaos matrix
hit it: a 45 s broker outage, then a worker's checkpoint waited in that call for minutes with its
barrier closed, its partitions delivered and none processed (5,863 of 20,000 outputs missing
when the run ended). No broker here: a fake client whose call blocks.
"""
import asyncio
import threading

import pytest

import streamkit as sk
from streamkit.errors import TransactionAborted
from streamkit.transport import confluent_producer
from streamkit.transport.confluent_producer import ConfluentProducer


class HangingClient:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def send_offsets_to_transaction(self, offsets, group, timeout):
        self.calls.append("send_offsets_to_transaction")
        self.release.wait(30)  # as librdkafka's hung coordinator request: past its own timeout

    def abort_transaction(self, timeout):
        self.calls.append("abort_transaction")


async def test_a_transactional_call_that_never_returns_fails_the_transaction_and_the_next_call_at_once(monkeypatch):
    monkeypatch.setattr(confluent_producer, "TXN_CALL_GRACE", 0.3)
    producer = ConfluentProducer(sk.App("hung", broker="127.0.0.1:1").conf, transactional_id="hung-1")
    client = producer._client = HangingClient()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransactionAborted, match="send_offsets_to_transaction did not return"):
            await producer._txn_call("send_offsets_to_transaction", client.send_offsets_to_transaction, [], None,
                                     timeout=0.2)
        assert loop.time() - started < 5
        # the hung call still holds the client: another call would overlap it (librdkafka refuses,
        # or waits behind it for ever); it fails at once, so the caller replaces the producer
        with pytest.raises(TransactionAborted, match="never returned"):
            await asyncio.wait_for(producer.abort_transaction(), 5)
        assert client.calls == ["send_offsets_to_transaction"]
    finally:
        client.release.set()
