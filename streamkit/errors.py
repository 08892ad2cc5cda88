"""Exceptions users can catch; each one names what went wrong and where."""
from __future__ import annotations

from typing import Any, Mapping


class StreamkitError(Exception):
    """Base class of every streamkit error."""


class NoRetry(Exception):
    """Marks an error the same record raises again on every attempt (a key of another partition,
    a value that does not decode or validate, a setting that cannot work): an agent's supervisor
    hands the record to the error policy at once, with one log line and no traceback."""


class ConfigurationError(StreamkitError, NoRetry):
    """A setting, topic or agent definition that cannot work."""


class BrokerUnavailable(StreamkitError):
    """The Kafka broker could not be reached within the bounded startup retry."""


class DecodeError(StreamkitError, NoRetry):
    """A record's key or value does not decode or validate against its declared type."""


class TopicMismatch(ConfigurationError):
    """An existing topic disagrees with its declaration (for example its partition count)."""


class ProducerFenced(StreamkitError):
    """A newer producer with the same transactional id took over: this one must stop writing."""


class GroupFenced(ProducerFenced):
    """The consumer group moved to a new generation without this member (a rebalance it missed):
    its transaction must not commit, and it must rejoin before writing again."""


class TransactionAborted(StreamkitError):
    """A transaction could not commit and was rolled back; its input records are processed again."""


class StoreWriteFailed(StreamkitError):
    """A table's local store (RocksDB) could not be written (disk full, directory unwritable):
    the worker halts rather than serve or build on a store that lags its changelog; the changelog
    holds the writes, so the next owner (or this worker after a restart) recovers them."""


class ForeignChangelog(StreamkitError):
    """A table's changelog holds records another framework wrote in a format streamkit would
    misread (a Faust windowed table's or SetTable's): the restore stops before the table serves
    or the worker processes anything with it (tables/faust_changelogs.py)."""


class TransactionsUnsupported(StreamkitError):
    """The driver or broker cannot run transactions."""


class WorkerStopped(StreamkitError):
    """The worker halted because the ``stop`` error policy was hit."""


class AgentFailed(StreamkitError):
    """An agent kept failing outside a record (``agent_max_restarts``), or could not start while
    the topology was planned: its code is at fault, so the worker halts rather than loop."""


class SparkUnsupported(ConfigurationError):
    """An agent does something a Spark job cannot run exactly as the worker would (the message says what)."""


def exception_types(name: str, value: Any) -> tuple[type[BaseException], ...]:
    """``value`` (an exception type, or several; a name such as ``KeyError`` or
    ``module:Name`` for each) as a tuple of exception types; anything else is refused naming
    ``name``, the setting or option it was given to."""
    import builtins
    import importlib

    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, type) or not hasattr(value, "__iter__"):
        value = [value]
    types: list[type[BaseException]] = []
    for item in value:
        found = item
        if isinstance(item, str):
            module, _, attribute = item.rpartition(":")
            try:
                found = getattr(importlib.import_module(module) if module else builtins, attribute)
            except (ImportError, AttributeError, ValueError):
                found = None
        if not (isinstance(found, type) and issubclass(found, BaseException)):
            raise ConfigurationError(f"{name}: {item!r} is not an exception type; give the types (or names such "
                                     "as 'KeyError' or 'module:Name') whose records go to the error policy "
                                     "without retries")
        types.append(found)
    return tuple(types)


def refuse_faust_options(call: str, given: Mapping[str, Any], ways: Mapping[str, str],
                         error: type[Exception] = TypeError, first: str = "") -> None:
    """Faust's keyword options streamkit does not take, set in ``call(first, ...)``: refused
    with the streamkit way (``ways``), never ignored; unknown names as Python would."""
    for name, value in given.items():
        why = ways.get(name)
        if why is None:
            raise TypeError(f"{call}({first}) got an unexpected keyword argument {name!r}")
        if value not in (None, False):
            raise error(f"{call}({first + ', ' if first else ''}{name}=...) is not supported: {why}")
