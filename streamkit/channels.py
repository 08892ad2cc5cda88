"""``app.channel()``, as in Faust: an in-process queue an agent reads, nothing through Kafka.

    numbers = app.channel(value_type=int)

    @app.agent(numbers)
    async def square(stream):
        async for n in stream:
            yield n * n

    await numbers.send(value=4)

Records sent to a channel are delivered to its agents in this worker only and are not durable:
there is no offset to commit, so a record lost with a crashed worker is not processed again
(use a topic for that). ``send`` waits while the agents' queue is full (backpressure). The
value is encoded with the channel's codec only when a failing record goes to the dead-letter
topic. ``ask`` needs a topic (the reply names where to answer).
"""
from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Any

from .codecs import codec_for
from .event_time import epoch_ms
from .runtime.event import Event
from .runtime.inbox import Batch, Subscriber
from .transport.base import TP, Message

if TYPE_CHECKING:
    from .types.app import AppProtocol

_numbers = itertools.count(1)


class Channel:
    """An agent input that stays in this process (module docstring)."""

    is_channel = True

    @property
    def members(self) -> tuple["Channel", ...]:
        """What an agent reading it subscribes to: the channel itself (topics: their Kafka topics)."""
        return (self,)
    partitions = 1

    def __init__(self, app: "AppProtocol", *, name: str | None = None, key_type: Any = None, value_type: Any = None,
                 maxsize: int | None = None) -> None:
        self.app = app
        self.name = name or f"channel-{next(_numbers)}"
        self.key_type = key_type
        self.value_type = value_type
        self.maxsize = maxsize
        self.key_codec = codec_for(key_type, key=True)
        self.value_codec = codec_for(value_type)
        self.subscribers: list[Subscriber] = []
        self._offset = 0

    def __repr__(self) -> str:
        return f"<Channel {self.name}>"

    def subscriber(self, name: str) -> Subscriber:
        """A queue for one agent's streams (``Agent.start``)."""
        subscriber = Subscriber(f"{name}:{self.name}", self.maxsize or self.app.conf.stream_buffer_batches)
        self.subscribers.append(subscriber)
        return subscriber

    async def send(self, *, key: Any = None, value: Any = None, headers: Any = None, **_ignored: Any) -> None:
        """Hand one record to every agent reading this channel (waits while their queue is full)."""
        extra = [name for name, given in _ignored.items() if given is not None]
        if extra:
            raise TypeError(f"a channel has one partition and no timestamps: send() takes key, value and headers, "
                            f"not {', '.join(extra)}")
        if not self.subscribers:
            raise RuntimeError(f"nothing reads {self.name}: start the worker (app.start(), streamkit worker) first")
        message = _ChannelMessage(self, self._offset, key, value, list(headers or []))
        self._offset += 1
        event = Event(key, value, message)
        for subscriber in self.subscribers:
            await subscriber.put(Batch(TP(self.name, 0), [event]))

    send_soon = send
    put = send


class _ChannelMessage(Message):
    """A channel record's where-from; its bytes are encoded only if someone asks (dead letters)."""

    __slots__ = ("_channel", "_key_obj", "_value_obj")

    def __init__(self, channel: Channel, offset: int, key: Any, value: Any, headers: list) -> None:
        super().__init__(channel.name, 0, offset, None, None, headers, epoch_ms(time.time()))
        self._channel, self._key_obj, self._value_obj = channel, key, value

    @property
    def key(self) -> bytes | None:
        return self._channel.key_codec.encode(self._key_obj)

    @key.setter
    def key(self, _value: Any) -> None:
        pass

    @property
    def value(self) -> bytes | None:
        return self._channel.value_codec.encode(self._value_obj)

    @value.setter
    def value(self, _value: Any) -> None:
        pass
