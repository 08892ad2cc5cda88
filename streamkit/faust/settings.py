"""Faust's setting names, so ``faust.App("x", broker_commit_interval=2.0, datadir=...)`` runs with
its import changed: each name is renamed to streamkit's with Faust's units converted (seconds
to milliseconds where streamkit counts those), accepted where its value is what streamkit does
anyway, or refused with what to do instead. Never accepted and ignored.

Names both share (``broker``, ``store``, ``processing_guarantee``, ``topic_partitions``,
``table_standby_replicas``, ``web_port``, ``web_enabled``, ...) and the app-level ones streamkit
honours itself (``version``, ``id_format``, ``origin``, ``autodiscover``, ``timezone``,
``key_serializer``, ``value_serializer``, ``logging_config``, ``loghandlers``) are Settings fields.
"""
from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, Callable

from ..errors import ConfigurationError

log = logging.getLogger("streamkit.app")


def _seconds(value: Any) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _ms(value: Any) -> int:
    return round(_seconds(value) * 1000)


def _acks(value: Any) -> str:
    return {-1: "all", "-1": "all", "all": "all", 0: "0", "0": "0", 1: "1", "1": "1"}[value]


def _text(value: Any) -> str:
    """A path, URL or name (``Path``, ``yarl.URL`` and ``str`` alike); ``str(None)`` is no address."""
    if value is None or isinstance(value, (bool, int, float, dict, list, tuple)):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return str(value)


def _compression(value: Any) -> str:
    return "none" if value is None else str(value)


# Every setting of faust-streaming 0.11's Settings (faust/types/settings/settings.py): the
# settings reference shows a field's Faust name from here and RENAMED.
FAUST_SETTINGS = frozenset("""
aerospike_retries_on_exception aerospike_sleep_seconds_between_retries_on_exception agent_supervisor autodiscover
blocking_timeout broker broker_api_version broker_check_crcs broker_client_id broker_commit_every
broker_commit_interval broker_commit_livelock_soft_timeout broker_consumer broker_credentials
broker_heartbeat_interval broker_max_poll_interval broker_max_poll_records broker_producer broker_rebalance_timeout
broker_request_timeout broker_session_timeout cache canonical_url consumer_api_version consumer_auto_offset_reset
consumer_connections_max_idle_ms consumer_group_instance_id consumer_max_fetch_size consumer_metadata_max_age_ms
crash_app_on_aerospike_exception cython_optimizations datadir debug env_prefix id_format key_serializer
logging_config loghandlers origin processing_guarantee producer_acks producer_api_version producer_compression_type
producer_connections_max_idle_ms producer_linger producer_linger_ms producer_max_batch_size producer_max_request_size
producer_metadata_max_age_ms producer_partitioner producer_request_timeout producer_threaded
recovery_consistency_check reply_create_topic reply_expires reply_to reply_to_prefix ssl_context store
store_check_exists stream_ack_cancelled_tasks stream_ack_exceptions stream_buffer_maxsize stream_processing_timeout
stream_publish_on_commit stream_recovery_delay stream_wait_empty table_cleanup_interval table_key_index_size
table_standby_replicas tabledir timezone topic_allow_declare topic_disable_leader topic_partitions
topic_replication_factor url value_serializer version web web_application_options web_bind web_cors_options
web_enabled web_graph_enabled web_host web_in_thread web_metrics_enabled web_port web_router_enabled web_ssl_context
web_stats_enabled web_tables_enabled web_transport worker_redirect_stdouts worker_redirect_stdouts_level
""".split())

# Faust name -> (streamkit name, converter from Faust's value and unit)
RENAMED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "url": ("broker", lambda v: v),
    "datadir": ("data_dir", _text),
    "broker_commit_interval": ("commit_interval", _seconds),
    "broker_session_timeout": ("session_timeout_ms", _ms),
    "broker_heartbeat_interval": ("heartbeat_interval_ms", _ms),
    "broker_max_poll_interval": ("max_poll_interval_ms", _ms),
    "broker_max_poll_records": ("fetch_max_records", int),
    "consumer_auto_offset_reset": ("auto_offset_reset", _text),
    "topic_replication_factor": ("topic_replicas", int),
    "producer_acks": ("acks", _acks),
    "producer_linger_ms": ("linger_ms", int),
    "producer_linger": ("linger_ms", _ms),
    "producer_compression_type": ("compression", _compression),
    "web_bind": ("web_host", _text),
    "canonical_url": ("web_advertised_url", _text),
}

# Faust name -> (values that describe what streamkit does, what it does / what to use instead)
ONLY: dict[str, tuple[tuple[Any, ...], str]] = {
    "stream_wait_empty": ((True,), "a revoke or stop always finishes the records under way (bounded by stop_timeout)"),
    "stream_ack_exceptions": ((True,), "a record whose agent raised is retried agent_retries times, then handed to "
                                       "error_policy (dlq, skip or stop)"),
    "stream_ack_cancelled_tasks": ((True,), "records of a cancelled agent are handed to error_policy"),
    "stream_publish_on_commit": ((False,), "sends are flushed at every checkpoint; use processing_guarantee="
                                           "'exactly_once' for outputs visible only with their commit"),
    "topic_allow_declare": ((True,), "streamkit creates the topics it needs (and checks their partition counts)"),
    "topic_disable_leader": ((False,), "the leader topic <app-id>-__leader elects the worker for on_leader timers"),
    "broker_check_crcs": ((True,), "the clients always check CRCs"),
    "broker_api_version": (("auto",), "the clients negotiate the API version"),
    "consumer_api_version": (("auto",), "the clients negotiate the API version"),
    "producer_api_version": (("auto",), "the clients negotiate the API version"),
    "web_transport": (("tcp://",), "the web server listens on web_host:web_port"),
    "web_in_thread": ((False,), "the web server runs on the worker's event loop"),
    "worker_redirect_stdouts": ((False,), "print() goes to stdout; log through logging"),
    "debug": ((False,), "use -l debug (streamkit worker -l debug) for debug logging"),
    "cython_optimizations": ((False,), "streamkit's hot path is batched pure Python plus the clients' C code"),
    "blocking_timeout": ((None,), "kill -USR1 <worker pid> prints every task's stack"),
    "tabledir": (("tables",), "tables live under data_dir/<app-id>/<table>/<partition>"),
    "cache": (("memory://",), "streamkit has no web-view cache"),
    "recovery_consistency_check": ((True,), "recovery always checks that every changelog value decodes"),
    "store_check_exists": ((True,), "stores are created when missing"),
    "producer_threaded": ((False,), "use driver='confluent' for a producer that runs in librdkafka's threads"),
    "web_stats_enabled": ((True,), "/metrics serves streamkit's counters"),
    "web_tables_enabled": ((True,), "/tables/<name>/<key> serves every table"),
    "web_router_enabled": ((True,), "table queries are forwarded to the owning worker"),
    "web_metrics_enabled": ((True,), "/metrics is served whenever web_enabled"),
    "reply_create_topic": ((True, False), "the reply topic <app-id>-replies is always created"),
}

# Faust name -> what streamkit does instead: settings that only tune when Faust does some work,
# accepted with any valid duration (a Faust app sets them) and logged with what streamkit does
TIMING: dict[str, str] = {
    "table_cleanup_interval": "expired windows are deleted at every checkpoint (every commit_interval), in the "
                              "same checkpoint as the offsets that expired them",
}

# Faust name -> what to use instead (any value refused)
REFUSED: dict[str, str] = {
    "env_prefix": "environment overrides are STREAMKIT_<SETTING>",
    "agent_supervisor": "an agent that raises is restarted with its held records (agent_retries, error_policy)",
    "broker_consumer": "one broker list serves both clients: broker=",
    "broker_producer": "one broker list serves both clients: broker=",
    "broker_client_id": "consumer_config/producer_config={'client_id' (aiokafka) or 'client.id' (confluent): ...}",
    "broker_commit_every": "checkpoints run every commit_interval seconds (and on revoke and stop)",
    "broker_commit_livelock_soft_timeout": "a checkpoint waiting for a record says so every 10 s in the log",
    "broker_credentials": "sasl_mechanism, sasl_username, sasl_password (or sasl_password_file) and ssl_cafile, "
                          "ssl_certfile, ssl_keyfile, ssl_password",
    "ssl_context": "ssl_cafile, ssl_certfile, ssl_keyfile and ssl_password",
    "broker_rebalance_timeout": "consumer_config={'rebalance_timeout_ms' (aiokafka) or 'max.poll.interval.ms' "
                                "(confluent): ...}",
    "broker_request_timeout": "consumer_config/producer_config={'request_timeout_ms' (aiokafka) or "
                              "'request.timeout.ms' (confluent): ...}",
    "consumer_max_fetch_size": "consumer_config={'max_partition_fetch_bytes' (aiokafka) or "
                               "'max.partition.fetch.bytes' (confluent): ...}",
    "consumer_group_instance_id": "consumer_config={'group.instance.id': ...} on driver='confluent'",
    "consumer_metadata_max_age_ms": "consumer_config={'metadata_max_age_ms' or 'metadata.max.age.ms': ...}",
    "consumer_connections_max_idle_ms": "consumer_config={'connections_max_idle_ms' or "
                                        "'connections.max.idle.ms': ...}",
    "producer_max_batch_size": "producer_config={'max_batch_size' (aiokafka; streamkit's default 262144) or "
                               "'batch.size' (confluent): ...}",
    "producer_max_request_size": "producer_config={'max_request_size' or 'message.max.bytes': ...}",
    "producer_partitioner": "streamkit partitions keys with Kafka's murmur2 (what the Java client does); "
                            "send(partition=) picks one explicitly",
    "producer_request_timeout": "producer_config={'request_timeout_ms' or 'message.timeout.ms': ...}",
    "producer_metadata_max_age_ms": "producer_config={'metadata_max_age_ms' or 'metadata.max.age.ms': ...}",
    "producer_connections_max_idle_ms": "producer_config={'connections_max_idle_ms' or "
                                        "'connections.max.idle.ms': ...}",
    "stream_buffer_maxsize": "stream_buffer_batches (fetched batches queued per stream, not records)",
    "stream_processing_timeout": "a checkpoint waiting for a record says so every 10 s; stop_timeout bounds stops",
    "stream_recovery_delay": "partitions resume as soon as their tables are recovered",
    "table_key_index_size": "windowed tables iterate their stored windows; there is no key index to size",
    "reply_expires": "asks time out with ask(timeout=)",
    "reply_to": "replies go to <app-id>-replies",
    "reply_to_prefix": "replies go to <app-id>-replies",
    "web": "the web server is aiohttp, always",
    "web_ssl_context": "serve the web port behind a TLS-terminating proxy; web_auth_token guards it",
    "web_cors_options": "serve the web port behind a proxy that sets CORS headers",
    "web_application_options": "app.page() adds views; the aiohttp application is streamkit's",
    "web_graph_enabled": "streamkit has no graph view",
    "worker_redirect_stdouts_level": "print() goes to stdout; log through logging",
    "aerospike_retries_on_exception": "stores are rocksdb:// or memory://",
    "aerospike_sleep_seconds_between_retries_on_exception": "stores are rocksdb:// or memory://",
    "crash_app_on_aerospike_exception": "stores are rocksdb:// or memory://",
}


FAUST_ENV: dict[str, str] = {  # Faust's environment variable -> its setting (Faust reads them over App(...) keywords)
    "AEROSPIKE_RETRIES_ON_EXCEPTION": "aerospike_retries_on_exception",
    "AEROSPIKE_SLEEP_SECONDS_BETWEEN_RETRIES_ON_EXCEPTION": "aerospike_sleep_seconds_between_retries_on_exception",
    "AGENT_SUPERVISOR": "agent_supervisor", "APP_DATADIR": "datadir", "APP_DEBUG": "debug",
    "APP_ENV_PREFIX": "env_prefix", "APP_ID_FORMAT": "id_format", "APP_KEY_SERIALIZER": "key_serializer",
    "APP_REPLY_CREATE_TOPIC": "reply_create_topic", "APP_REPLY_EXPIRES": "reply_expires",
    "APP_REPLY_TO_PREFIX": "reply_to_prefix", "APP_STORE": "store", "APP_TABLEDIR": "tabledir",
    "APP_VALUE_SERIALIZER": "value_serializer", "APP_VERSION": "version", "APP_WEB_ENABLED": "web_enabled",
    "APP_WEB_GRAPH_ENABLED": "web_graph_enabled", "APP_WEB_METRICS_ENABLED": "web_metrics_enabled",
    "APP_WEB_ROUTER_ENABLED": "web_router_enabled", "APP_WEB_STATS_ENABLED": "web_stats_enabled",
    "APP_WEB_TABLES_ENABLED": "web_tables_enabled", "BLOCKING_TIMEOUT": "blocking_timeout",
    "BROKER_API_VERSION": "broker_api_version", "BROKER_CHECK_CRCS": "broker_check_crcs",
    "BROKER_CLIENT_ID": "broker_client_id", "BROKER_COMMIT_EVERY": "broker_commit_every",
    "BROKER_COMMIT_INTERVAL": "broker_commit_interval",
    "BROKER_COMMIT_LIVELOCK_SOFT_TIMEOUT": "broker_commit_livelock_soft_timeout",
    "BROKER_CONSUMER_URL": "broker_consumer", "BROKER_CREDENTIALS": "broker_credentials",
    "BROKER_HEARTBEAT_INTERVAL": "broker_heartbeat_interval",
    "BROKER_MAX_POLL_INTERVAL": "broker_max_poll_interval", "BROKER_MAX_POLL_RECORDS": "broker_max_poll_records",
    "BROKER_PRODUCER_URL": "broker_producer", "BROKER_REBALANCE_TIMEOUT": "broker_rebalance_timeout",
    "BROKER_REQUEST_TIMEOUT": "broker_request_timeout", "BROKER_SESSION_TIMEOUT": "broker_session_timeout",
    "BROKER_URL": "broker", "CACHE_URL": "cache", "CONSUMER_API_VERSION": "consumer_api_version",
    "CONSUMER_AUTO_OFFSET_RESET": "consumer_auto_offset_reset",
    "CONSUMER_CONNECTIONS_MAX_IDLE_MS": "consumer_connections_max_idle_ms",
    "CONSUMER_GROUP_INSTANCE_ID": "consumer_group_instance_id",
    "CONSUMER_MAX_FETCH_SIZE": "consumer_max_fetch_size",
    "CONSUMER_METADATA_MAX_AGE_MS": "consumer_metadata_max_age_ms",
    "CRASH_APP_ON_AEROSPIKE_EXCEPTION": "crash_app_on_aerospike_exception",
    "CYTHON_OPTIMIZATIONS": "cython_optimizations", "NODE_CANONICAL_URL": "canonical_url",
    "PROCESSING_GUARANTEE": "processing_guarantee", "PRODUCER_ACKS": "producer_acks",
    "PRODUCER_API_VERSION": "producer_api_version", "PRODUCER_COMPRESSION_TYPE": "producer_compression_type",
    "PRODUCER_CONNECTIONS_MAX_IDLE_MS": "producer_connections_max_idle_ms", "PRODUCER_LINGER": "producer_linger",
    "PRODUCER_LINGER_MS": "producer_linger_ms", "PRODUCER_MAX_BATCH_SIZE": "producer_max_batch_size",
    "PRODUCER_MAX_REQUEST_SIZE": "producer_max_request_size",
    "PRODUCER_METADATA_MAX_AGE_MS": "producer_metadata_max_age_ms",
    "PRODUCER_REQUEST_TIMEOUT": "producer_request_timeout", "PRODUCER_THREADED": "producer_threaded",
    "RECOVERY_CONSISTENCY_CHECK": "recovery_consistency_check", "STORE_CHECK_EXISTS": "store_check_exists",
    "STREAM_BUFFER_MAXSIZE": "stream_buffer_maxsize", "STREAM_PROCESSING_TIMEOUT": "stream_processing_timeout",
    "STREAM_RECOVERY_DELAY": "stream_recovery_delay", "STREAM_WAIT_EMPTY": "stream_wait_empty",
    "TABLE_CLEANUP_INTERVAL": "table_cleanup_interval", "TABLE_KEY_INDEX_SIZE": "table_key_index_size",
    "TABLE_STANDBY_REPLICAS": "table_standby_replicas", "TIMEZONE": "timezone",
    "TOPIC_ALLOW_DECLARE": "topic_allow_declare", "TOPIC_DISABLE_LEADER": "topic_disable_leader",
    "TOPIC_PARTITIONS": "topic_partitions", "TOPIC_REPLICATION_FACTOR": "topic_replication_factor",
    "WEB_BIND": "web_bind", "WEB_HOST": "web_host", "WEB_PORT": "web_port",
    "WORKER_REDIRECT_STDOUTS": "worker_redirect_stdouts",
    "WORKER_REDIRECT_STDOUTS_LEVEL": "worker_redirect_stdouts_level",
}


def from_faust_environment(environ: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with Faust's environment variables applied over them, as Faust does (``BROKER_URL``,
    ``APP_DATADIR``, ``WEB_PORT``, ...); each value is parsed (int, float, true/false, none) and
    then goes through ``translate`` like a keyword. Each one applied is logged."""
    out = dict(values)
    for env, name in FAUST_ENV.items():
        raw = environ.get(env)
        if raw is None:
            continue
        try:
            translated = translate(name, _parse_env(raw))
        except ConfigurationError as exc:
            raise ConfigurationError(f"environment variable {env}={raw!r}: {exc}") from None
        out.pop(name, None)  # over the keyword, whichever name it was given by
        if translated is not None:
            out[translated[0]] = translated[1]
        log.info("Faust environment variable %s applied (%s)", env, translated[0] if translated else "accepted")
    return out


def _parse_env(raw: str) -> Any:
    lowered = raw.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def translate(name: str, value: Any) -> tuple[str, Any] | None:
    """A Faust setting as ``(streamkit name, value)``, None when it is accepted with nothing to
    set (its value is what streamkit does), or ConfigurationError saying what to do instead."""
    if name in RENAMED:
        target, convert = RENAMED[name]
        try:
            return target, convert(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"{name}={value!r} (Faust's name for {target}): cannot convert it ({exc!r})") from None
    if name in ONLY:
        accepted, what = ONLY[name]
        if value in accepted:
            return None
        raise ConfigurationError(
            f"{name}={value!r} is not supported: {what}"
            + (f" ({name}={accepted[0]!r} is accepted)" if len(accepted) == 1 else "")
        )
    if name in TIMING:
        try:
            seconds = _seconds(value)
        except (TypeError, ValueError):
            seconds = -1.0
        if not seconds >= 0:
            raise ConfigurationError(f"{name}={value!r}: Faust takes seconds (a number or timedelta, not negative)")
        log.info("Faust setting %s=%r accepted: %s", name, value, TIMING[name])
        return None
    if name in REFUSED:
        raise ConfigurationError(f"Faust setting {name!r} is not supported by streamkit: {REFUSED[name]}")
    return name, value


def is_faust_name(name: str) -> bool:
    return name in RENAMED or name in ONLY or name in TIMING or name in REFUSED
