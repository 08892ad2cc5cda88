"""Faust's type names and helpers under the names Faust code imports them by.

Faust splits each concept into an abstract ``...T`` type (for annotations) and its class;
streamkit has one class per concept, so each ``...T`` is that class: ``isinstance`` and
annotations (``StreamT[Order]``) work as in Faust.
"""
from __future__ import annotations

import uuid as _uuid

from mode import Service, ServiceT

from ..agents.agent import Agent as AgentT
from ..app import App as AppT
from ..channels import Channel as ChannelT
from ..models.record import Record as ModelT
from ..runtime.event import Event as EventT
from ..streams.stream import Stream as StreamT
from ..tables.table import Table as TableT
from ..topics import Topic as TopicT


def uuid() -> str:
    """A random UUID as a string: ``faust.uuid()``."""
    return str(_uuid.uuid4())


__all__ = ["AgentT", "AppT", "ChannelT", "EventT", "ModelT", "Service", "ServiceT", "StreamT", "TableT", "TopicT",
           "uuid"]
