"""What topics, tables, agents, joins, web and the runtime use of the App that holds them.

``App`` satisfies ``AppProtocol``; the lower layers annotate with it so that none of them
imports ``streamkit.app`` (the layers contract in pyproject.toml counts type-only imports).
Members are read-only properties where the lower layers only read, so the App's concrete
registries (``dict[str, Agent]``...) fit the narrower views declared here.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from ..scheduled_sends import ScheduledSends
from ..sensors import SensorDelegate
from ..settings import Settings
from ..transport.base import Driver


class SignalProtocol(Protocol):
    """An app signal (``app.on_partitions_assigned`` ...): the runtime only sends it."""

    async def send(self, **kwargs: Any) -> None: ...


class ClockProtocol(Protocol):
    """The app's clock (``timers.Clock``, a fake one in tests)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


class TopicCreationProtocol(Protocol):
    """``runtime.topic_creation.TopicsOnFirstSend``: topics known to exist, and the creation of others."""

    known: set[str]

    def exist(self, names: Iterable[str]) -> None: ...

    async def ensure(self, name: str) -> None: ...


class RepliesProtocol(Protocol):
    """``agents.replies.Replies``: ``agent.ask()`` and the answer an agent sends back."""

    async def ask(self, topic: Any, key: Any, value: Any, *, timeout: float, reply_type: Any) -> Any: ...

    async def reply(self, reply_to: str, correlation: bytes | None, value: Any) -> None: ...


class TopicProtocol(Protocol):
    """A ``topics.Topic`` where the layer below topics looks one up: its name and declared partitions."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> int | None: ...


class SourceProtocol(TopicProtocol, Protocol):
    """What an agent reads: a topic, several (``app.topic("a", "b")``), a pattern or a channel."""

    @property
    def members(self) -> Sequence[TopicProtocol]: ...


class AgentProtocol(Protocol):
    """An ``agents.agent.Agent`` as the runtime, topology and web see it."""

    @property
    def name(self) -> str: ...

    @property
    def topic(self) -> SourceProtocol: ...

    @property
    def sinks(self) -> list[Any]: ...

    @property
    def restarts(self) -> int: ...

    @property
    def failure(self) -> BaseException | None: ...

    @property
    def restarting(self) -> str | None: ...

    def start(self, context: Any) -> None: ...  # runtime/context.ProcessingContext

    async def stop(self) -> None: ...

    def streams_started(self) -> bool: ...

    def internal_topics(self) -> list[str]: ...


class AppProtocol(Protocol):
    """The App as its topics, tables, agents, joins, web server and runtime see it."""

    id: str
    conf: Settings
    runtime: Any  # runtime.worker.Runtime while a worker runs, else None
    # runtime/context.ProcessingContext (a higher layer than this one): what topics, tables, joins
    # and web views use of the running worker, handed to each as it is made
    processing: Any
    sensors: SensorDelegate
    scheduled_sends: ScheduledSends
    topics: dict[str, Any]  # name -> topics.Topic (topic_patterns.py takes a pattern's template back out)
    tables: dict[str, Any]
    joins: list[Any]
    pages: list[tuple[str, Any]]

    @property
    def clock(self) -> ClockProtocol: ...

    @property
    def agents(self) -> Mapping[str, AgentProtocol]: ...

    @property
    def timers(self) -> list[Any]: ...

    @property
    def replies(self) -> RepliesProtocol: ...

    @property
    def topic_creation(self) -> TopicCreationProtocol: ...

    @property
    def leader_topic(self) -> TopicProtocol: ...

    @property
    def reply_topic(self) -> TopicProtocol: ...

    @property
    def cluster_topic(self) -> TopicProtocol: ...

    @property
    def dlq_topic_name(self) -> str: ...

    @property
    def driver(self) -> Driver: ...

    @property
    def rebalancing(self) -> bool: ...

    @property
    def on_partitions_assigned(self) -> SignalProtocol: ...

    @property
    def on_partitions_revoked(self) -> SignalProtocol: ...

    @property
    def on_rebalance_complete(self) -> SignalProtocol: ...

    def topic(self, name: str = "", *more: str, key_type: Any = None, value_type: Any = None,
              partitions: int | None = None, replicas: int | None = None, config: dict[str, str] | None = None,
              key_serializer: Any = None, value_serializer: Any = None, internal: bool = False,
              pattern: Any = None) -> Any: ...

    def all_topics(self) -> Sequence[TopicProtocol]: ...

    def copartition_group(self, subscribed: Iterable[str]) -> list[str]: ...

    def derived_topics(self, names: Iterable[str]) -> list[str]: ...

    async def ensure_topics(self) -> dict[str, int]: ...

    async def resolve_patterns(self, *, planning: bool) -> None: ...

    async def resolve_tables(self, subscribed: Iterable[str], counts: dict[str, int]) -> dict[str, int]: ...

    async def send(self, channel: Any, key: Any = None, value: Any = None, *, partition: int | None = None,
                   timestamp: float | None = None, headers: Any = None) -> asyncio.Future[Any]: ...

    async def send_raw(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                       timestamp: int | None = None, partition: int | None = None,
                       track: bool = True) -> asyncio.Future[Any] | None: ...

    def join_topics(self, left: Any, right: Any, **options: Any) -> Any: ...

    def join_tables(self, left: Any, right: Any, **options: Any) -> Any: ...




    def table_route(self, *, table: Any, match_info: str | None = None,
                    query_param: str | None = None) -> Callable[[Any], Any]: ...

    def topic_route(self, topic: Any, shard_param: str | None = None, *, query_param: str | None = None,
                    match_info: str | None = None, exact_key: str | None = None) -> Callable[[Any], Any]: ...
