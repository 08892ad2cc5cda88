"""streamkit: stream processing for Python on Kafka — typed topics, async agents, tables."""
# first: picks each per-record module's compiled build or its .py (STREAMKIT_PURE_PYTHON) before any is imported
from . import compiled as _compiled  # noqa: F401
from .agents.agent import Agent
from .app import App
from .channels import Channel
from .codecs import Codec, JsonCodec, RawCodec, StrCodec
from .errors import (
                     AgentFailed,
                     BrokerUnavailable,
                     ConfigurationError,
                     DecodeError,
                     ForeignChangelog,
                     GroupFenced,
                     ProducerFenced,
                     SparkUnsupported,
                     StoreWriteFailed,
                     StreamkitError,
                     TopicMismatch,
                     TransactionAborted,
                     WorkerStopped,
)
from .faust.names import AgentT, AppT, ChannelT, EventT, ModelT, Service, ServiceT, StreamT, TableT, TopicT, uuid
from .models.record import Record
from .runners import RUNNERS as _RUNNERS  # noqa: F401  (fills app.RUNNERS: app.main(), @app.command, app.spark)
from .runtime.event import Event
from .sensors import Monitor, Sensor
from .settings import DriverName, ErrorPolicyName, Guarantee, Settings
from .streams.stream import Stream, current_event
from .tables.table import GlobalTable, Table
from .timers import Clock
from .topics import Topic
from .version import __version__

__all__ = [
    "Agent", "AgentFailed", "App", "BrokerUnavailable", "Clock", "Codec", "ConfigurationError", "DecodeError", "DriverName",
    "ErrorPolicyName", "Event", "ForeignChangelog",
    "GroupFenced", "Guarantee", "JsonCodec", "ProducerFenced", "RawCodec", "Record", "Settings",
    "SparkUnsupported", "StrCodec",
    "StoreWriteFailed", "Stream", "StreamkitError", "Topic", "TopicMismatch", "TransactionAborted",
    "WorkerStopped", "__version__",
    "current_event",
    # Faust's names (faust/names.py), so ``import streamkit as faust`` finds them
    "AgentT", "AppT", "Channel", "ChannelT", "EventT", "GlobalTable", "ModelT", "Monitor", "Sensor", "Service",
    "ServiceT", "StreamT", "Table", "TableT", "TopicT", "uuid",
]
