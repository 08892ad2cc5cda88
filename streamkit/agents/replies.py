"""Request/reply for ``agent.ask``: correlation ids in headers, answers on the app's reply topic.

Each worker reads the reply topic without a consumer group (every worker sees every reply and
keeps only those it is waiting for), starting at the end offset taken before its first request.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from ..models.convert import compile_converter
from ..models.record import dumps
from ..runtime.loops import restarting
from ..transport.base import TP, Message
from ..transport.reader import Reader

if TYPE_CHECKING:
    from ..topics import Topic
    from ..types.app import AppProtocol

log = logging.getLogger("streamkit.replies")

HEADER_REPLY_TO = "streamkit-reply-to"
HEADER_CORRELATION = "streamkit-correlation-id"


class Replies:
    def __init__(self, app: "AppProtocol") -> None:
        self.app = app
        self._pending: dict[bytes, asyncio.Future] = {}
        self._reader: Reader | None = None
        self._lock = asyncio.Lock()

    async def _ensure_reading(self) -> None:
        async with self._lock:
            if self._reader is not None:
                return
            tp = TP(self.app.reply_topic.name, 0)
            consumer = self.app.driver.consumer(None)
            await consumer.start()
            ends = await consumer.end_offsets([tp])
            await consumer.assign([tp], {tp: ends[tp]})
            self._reader = Reader(consumer, self._on_replies, name="reply reader", supervise=restarting)

    def _on_replies(self, _tp: TP, messages: list[Message]) -> None:
        for message in messages:
            for name, value in message.headers:
                if name == HEADER_CORRELATION:
                    fut = self._pending.get(value)
                    if fut is not None and not fut.done():
                        fut.set_result(message.value)

    async def ask(self, topic: "Topic", key: Any, value: Any, *, timeout: float, reply_type: Any) -> Any:
        await self._ensure_reading()
        correlation = uuid.uuid4().hex.encode()
        fut = asyncio.get_running_loop().create_future()
        self._pending[correlation] = fut
        try:
            headers = [(HEADER_REPLY_TO, self.app.reply_topic.name.encode()), (HEADER_CORRELATION, correlation)]
            await topic.send(key=key, value=value, headers=headers)
            async with asyncio.timeout(timeout):  # wait_for may swallow a cancellation (3.11)
                raw = await fut
        finally:
            self._pending.pop(correlation, None)
        decoded = orjson.loads(raw) if raw is not None else None
        convert = compile_converter(reply_type) if reply_type is not None else None
        return convert(decoded) if convert is not None else decoded

    async def reply(self, reply_to: str, correlation: bytes | None, value: Any) -> None:
        headers = [(HEADER_CORRELATION, correlation or b"")]
        await self.app.send_raw(reply_to, None, dumps(value), headers=headers)

    async def stop(self) -> None:
        if self._reader is not None:
            reader, self._reader = self._reader, None
            await reader.stop()
