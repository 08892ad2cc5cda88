"""One typed settings object; every field documented once and overridable from the environment.

An environment variable ``STREAMKIT_<FIELD>`` (upper case) overrides the value given in code,
so the same app module runs unchanged against a laptop broker, CI's dev broker and production.
"""
from __future__ import annotations

import dataclasses
import difflib
import hmac
import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, get_type_hints

from .env_names import warn_unknown
from .errors import ConfigurationError, exception_types
from .faust.settings import from_faust_environment, is_faust_name, translate
from .setting_types import convert


class Secret:
    """A password or token: ``repr``, ``str``, ``dataclasses.asdict`` and f-strings show
    ``'****'``; the clients get it through ``reveal()`` only."""

    __slots__ = ("_value",)

    def __init__(self, value: "str | Secret" = "") -> None:
        self._value = value.reveal() if isinstance(value, Secret) else str(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('****')" if self._value else "Secret('')"

    def __str__(self) -> str:
        return "****" if self._value else ""

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return hmac.compare_digest(self._value, other._value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("Secret", len(self._value)))

    def __deepcopy__(self, memo: dict) -> "Secret":
        return self  # immutable; asdict() keeps it masked

    def __reduce__(self) -> Any:  # a pickled Settings (Spark executors) keeps the value
        return (Secret, (self._value,))


_SECRETS = ("sasl_password", "ssl_password", "web_auth_token", "sasl_oauth_client_secret")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# Native client settings whose values are credentials (librdkafka's and aiokafka's spellings:
# sasl.password, ssl.key.password, sasl.oauthbearer.client.secret, sasl.jaas.config,
# ssl.key.pem, sasl_plain_password, ...): masked inside consumer_config/producer_config too.
_SECRET_KEY_PARTS = ("password", "secret", "token", "jaas", "key.pem", "key_pem", "keystore")


def is_secret_key(key: str) -> bool:
    """Whether a native client setting named ``key`` holds a credential."""
    lowered = str(key).lower()
    return any(part in lowered for part in _SECRET_KEY_PARTS)


def reveal_config(config: dict[str, Any]) -> dict[str, Any]:
    """A native config with its masked values revealed: what a Kafka client is given."""
    return {key: value.reveal() if isinstance(value, Secret) else value for key, value in config.items()}
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class Guarantee(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class DriverName(StrEnum):
    AIOKAFKA = "aiokafka"
    CONFLUENT = "confluent"
    MEMORY = "memory"


class Rebalancing(StrEnum):
    AUTO = "auto"
    EAGER = "eager"
    INCREMENTAL = "incremental"


class ErrorPolicyName(StrEnum):
    DLQ = "dlq"
    SKIP = "skip"
    STOP = "stop"


# Choice settings: typed (a StrEnum equals its string, so "exactly_once" and
# Guarantee.EXACTLY_ONCE are the same setting); a string is converted, an unknown one refused.
_ENUMS: dict[str, type[StrEnum]] = {"processing_guarantee": Guarantee, "driver": DriverName,
                                     "error_policy": ErrorPolicyName, "rebalancing": Rebalancing}
ERROR_POLICIES = tuple(ErrorPolicyName)
DRIVERS = tuple(DriverName)
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
GUARANTEES = tuple(Guarantee)
TRANSACTION_PRODUCERS = ("auto", "worker", "partition")


@dataclass
class Settings:
    """Everything a worker can be tuned by. Defaults are safe for production."""

    broker: str = "kafka://127.0.0.1:9092"
    """Bootstrap servers, in any of Faust's forms: ``kafka://host:port``, several separated by
    ``,`` or ``;`` (or a list), plain ``host:port``; a missing port is 9092 and a missing host
    (``aiokafka://``) is localhost. ``confluent://`` also selects the confluent driver unless
    ``driver`` is set."""
    driver: DriverName = DriverName.AIOKAFKA
    """Kafka client: ``aiokafka`` (default), ``confluent`` (librdkafka, faster) or ``memory``."""
    processing_guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    """``at_least_once`` commits offsets only after outputs are flushed; ``exactly_once`` puts
    outputs, changelog records and offsets of each checkpoint into one Kafka transaction and
    reads every topic with ``read_committed``."""
    commit_interval: float = 1.0
    """Seconds between checkpoints (offset commits, or transaction commits under exactly-once);
    also done on revoke and stop. Under exactly-once it is also how stale downstream reads are."""
    repartition_purge_interval: float = 30.0
    """Seconds between deletions of what the group has committed from its ``group_by``
    repartition topics (Kafka Streams' ``repartition.purge.interval.ms``). Those topics keep
    their records regardless of age (``retention.ms=-1``: a re-keyed record keeps its old
    timestamp, which time retention would otherwise delete before it is read), so the worker
    deletes them once processed. 0: never (the topics then grow without bound)."""
    transaction_timeout_ms: int = 60000
    """Exactly-once: the broker aborts a transaction left open this long (a crashed worker's);
    until then read_committed readers of its partitions wait. Must exceed commit_interval."""
    transaction_producer: str = "auto"
    """Exactly-once: ``worker`` (one transactional producer per worker, fenced through the
    consumer group's generation, EOS v2), ``partition`` (one per input partition, EOS v1) or
    ``auto`` (worker on confluent and memory, partition on aiokafka, which cannot send the
    group's generation with the offsets)."""
    transactional_id: str = ""
    """Exactly-once with a per-worker producer: its ``transactional.id``. Empty derives a stable
    one from the app id and a worker slot persisted (and locked) under ``data_dir``."""
    error_policy: ErrorPolicyName = ErrorPolicyName.DLQ
    """What happens to a record that fails to decode or keeps failing in an agent:
    ``dlq`` sends its original bytes to the dead-letter topic, ``skip`` logs and moves on,
    ``stop`` halts the worker with a clear message."""
    agent_retries: int = 2
    """How many times a record is retried after an agent exception before the policy applies."""
    agent_no_retry: tuple[type[BaseException], ...] = ()
    """Exception types (or names: ``KeyError``, ``module:Name``) whose records go to the error
    policy at once, without retries; streamkit's own such errors (a key of another partition, a
    value that does not decode) never are retried."""
    agent_max_restarts: int = 10
    """Restarts in a row of an agent that fails outside a record (or returns) without taking one
    in between; each waits longer (0.1 s doubling to 5 s). One more failure and the agent is failed:
    /ready answers 503 naming it and the worker exits 1 when stopped; ``0`` fails it at the first.
    A run that takes a record, or lasts a minute, starts the count again."""
    dlq_topic: str = ""
    """Dead-letter topic; empty means ``<app-id>-dlq``."""
    auto_offset_reset: str = "earliest"
    """Where a group with no committed offset starts: ``earliest`` or ``latest``."""
    session_timeout_ms: int = 10000
    """Consumer group session timeout; a crashed worker's partitions move after this long.
    Under KIP-848 (``rebalancing`` chose ``group.protocol=consumer``) the broker owns it:
    ``group.consumer.session.timeout.ms``, 45 s by default."""
    heartbeat_interval_ms: int = 2000
    """Consumer heartbeat interval (keep at most a third of the session timeout)."""
    rebalancing: Rebalancing = Rebalancing.AUTO
    """How the group moves partitions when workers join or leave. ``incremental``: only the
    partitions that move are paused (confluent driver: KIP-848 ``group.protocol=consumer`` with
    the broker's co-partitioning ``range`` assignor where the broker has it, Apache Kafka 4.x;
    otherwise cooperative-sticky, refused when co-partitioned topics share tables).
    ``eager``: every rebalance revokes everything (range assignor). ``auto``: incremental where
    it is safe, eager otherwise (aiokafka speaks only eager). The worker logs what it chose."""
    max_poll_interval_ms: int = 300000
    """Longest gap between fetches before the group evicts this worker."""
    fetch_max_records: int = 10000
    """Upper bound on records handed to the router in one batch."""
    fetch_timeout: float = 0.2
    """Seconds a fetch waits for data before returning an empty batch."""
    gc_young_threshold: int = 100000
    """While the worker runs, objects allocated between young-generation collections (Python's
    default of 700 re-scans every in-flight batch many times: a third of the hot path's time).
    Above the objects a fetched batch keeps alive (10,000 records), most die before a
    collection sees them: at 20,000 the collector still took ~7% of a worker's CPU and its
    middle-generation passes paused the loop 45-100 ms (docs/decisions/0008-gc-young-threshold.md).
    Startup objects are frozen out of full collections. 0 leaves the collector alone."""
    stream_buffer_batches: int = 8
    """Batches queued per stream: with every stream at this bound the worker fetches nothing
    until one has room (a fetch timeout at most); at twice it the stream's partitions are paused
    at the consumer until it catches up (backpressure; the worker's other streams and
    rebalances go on)."""
    compression: str = "none"
    """Producer compression: none, gzip, snappy, lz4 or zstd."""
    acks: str = "all"
    """Producer acks: ``all``, ``1`` or ``0``."""
    linger_ms: int = 5
    """Producer batching delay."""
    topic_partitions: int = 8
    """Partition count for topics declared without one (and internal topics)."""
    topic_replicas: int = 1
    """Replication factor for topics the app creates (changelog, repartition, DLQ, ...)."""
    security_protocol: str = ""
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case); empty derives it from the other
    fields: TLS when a CA or client certificate is given, SASL when a mechanism is. SASL with
    ``security_protocol="SSL"`` means SASL_SSL (TLS asked for is never dropped)."""
    ssl_cafile: str = ""
    """PEM file of the CAs that may sign the broker's certificate (empty: the system's)."""
    ssl_capath: str = ""
    """A directory of CA certificates (OpenSSL hashed names), instead of ``ssl_cafile``."""
    ssl_crlfile: str = ""
    """PEM certificate revocation list checked against the broker's certificate."""
    ssl_check_hostname: bool = True
    """Whether the broker's certificate must name the host connected to."""
    ssl_certfile: str = ""
    """Client certificate (PEM), for brokers that authenticate clients by certificate (mTLS)."""
    ssl_keyfile: str = ""
    """Private key (PEM) of ``ssl_certfile``, when the certificate file does not hold it."""
    ssl_password: Secret | str = ""
    """Password of an encrypted ``ssl_keyfile`` (every client of both drivers gets it)."""
    ssl_password_file: str = ""
    """A file holding ``ssl_password`` (read at start, stripped)."""
    sasl_mechanism: str = ""
    """PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (with ``sasl_oauth_token``, or on
    confluent the OIDC client credentials below)."""
    sasl_username: str = ""
    """User name for PLAIN and SCRAM."""
    sasl_password: Secret | str = ""
    """Masked in repr/str/asdict/logs; ``sasl_password_file`` reads it from a file instead."""
    sasl_password_file: str = ""
    """A file holding ``sasl_password`` (read at start, stripped)."""
    sasl_oauth_token: Any = None
    """OAUTHBEARER, both drivers: a function returning ``(token, expiry as epoch seconds)``, or its
    ``"module:function"`` name (for STREAMKIT_SASL_OAUTH_TOKEN); called whenever a client needs a
    token (librdkafka's ``oauth_cb``, aiokafka's token provider)."""
    sasl_oauth_token_endpoint_url: str = ""
    """OAUTHBEARER on confluent: librdkafka fetches tokens itself (OIDC client credentials) from
    this endpoint with ``sasl_oauth_client_id``/``sasl_oauth_client_secret`` and ``sasl_oauth_scope``."""
    sasl_oauth_client_id: str = ""
    """OIDC client id for ``sasl_oauth_token_endpoint_url`` (confluent)."""
    sasl_oauth_client_secret: Secret | str = ""
    """OIDC client secret for ``sasl_oauth_token_endpoint_url``; masked like ``sasl_password``."""
    sasl_oauth_client_secret_file: str = ""
    """A file holding ``sasl_oauth_client_secret`` (read at start, stripped)."""
    sasl_oauth_scope: str = ""
    """OIDC scope asked for with the client credentials (empty: none)."""
    store: str = "rocksdb://"
    """Default table store: ``rocksdb://`` (durable, rocksdict) or ``memory://``."""
    data_dir: str = "streamkit-data"
    """Where RocksDB stores live (``<data_dir>/<app-id>/<table>/<partition>``); one per worker
    process on a machine."""
    rocksdb_options: dict[str, int] = field(default_factory=dict)
    """Faust's RocksDB options (bytes): ``block_cache_size`` (default 256 MiB) is one ceiling for the
    worker's stores together, blocks and memtables (Faust: a 2 GiB cache per store);
    ``write_buffer_size``, ``max_write_buffer_number``, ``target_file_size_base``,
    ``max_open_files``, ``bloom_filter_size`` (tables/rocks_options.py)."""
    table_cache_max_keys: int = 200_000
    """Keys the tables' write caches may hold together before a checkpoint is taken early (each
    checkpoint empties them): with many distinct keys per ``commit_interval`` this bounds memory.
    While an at-least-once checkpoint flushes, streams go on until the caches and the snapshot
    being flushed hold this many keys together (checked every 10 ms), then wait for it."""
    table_standby_replicas: int = 0
    """With 1 or more, each worker keeps warm copies of the table partitions it does not own
    (tailing their changelogs), so a failover replays only the tail."""
    web_enabled: bool = True
    """Serve web views (tables, health, readiness, metrics) inside the worker."""
    web_host: str = "127.0.0.1"
    """Address the web server binds to; loopback unless configured."""
    web_port: int = 6066
    """Port of the worker's web server (each worker on a machine needs its own)."""
    web_advertised_url: str = ""
    """URL other workers use to forward table queries here; default http(s)://<web_host>:<web_port>."""
    web_ssl_certfile: str = ""
    """Serve the web views over HTTPS with this certificate (PEM; the key in it or in
    ``web_ssl_keyfile``)."""
    web_ssl_keyfile: str = ""
    """Private key (PEM) of ``web_ssl_certfile``, when the certificate file does not hold it."""
    web_ssl_cafile: str = ""
    """The CAs that may sign other workers' web certificates, for forwarded queries (empty: the
    system's)."""
    web_auth_token: Secret | str = ""
    """When set, every web request needs ``Authorization: Bearer <token>`` (compared in constant
    time); table and topic queries forwarded to another worker carry it."""
    web_auth_token_file: str = ""
    """A file holding ``web_auth_token`` (read at start, stripped)."""
    web_max_request_size: int = 1024 * 1024
    """Largest request body, in bytes, a view may read; a larger one answers 413."""
    broker_connect_timeout: float = 20.0
    """Seconds to keep retrying an unreachable broker at startup before giving up."""
    stop_timeout: float = 8.0
    """Seconds a graceful stop waits for in-flight records before committing what is done."""
    version: int = 1
    """Faust's app version: above 1 the app id becomes ``id_format`` (``<id>-v<version>``), so a new
    version starts with its own consumer group, changelogs and internal topics."""
    id_format: str = "{id}-v{self.version}"
    """Faust's: how ``version`` enters the app id (``{id}`` and ``{self.<setting>}`` fields)."""
    origin: str = ""
    """Faust's: the package of the app, searched by ``autodiscover=True``."""
    autodiscover: bool | list[str] = False
    """Faust's: import every module of ``origin`` (True) or of the listed packages when the
    worker starts, so agents, tables and timers declared there register themselves."""
    timezone: str = ""
    """Faust's: the default time zone of crontab timers (empty: UTC)."""
    key_serializer: str = "raw"
    """Faust's: the codec of topic keys declared without a type or serializer (raw, str, json)."""
    value_serializer: str = "json"
    """Faust's: the codec of topic values declared without a type or serializer (json, raw, str)."""
    logging_config: dict[str, Any] = field(default_factory=dict)
    """Faust's: a ``logging.config.dictConfig`` dict applied when the worker starts."""
    loghandlers: list[Any] = field(default_factory=list)
    """Faust's: logging handlers added to the root logger when the worker starts."""
    consumer_config: dict[str, Any] = field(default_factory=dict)
    """Extra driver-native consumer settings, passed through unchanged; the values of credential
    keys (``sasl.password``, ``ssl.key.password``, ``sasl.oauthbearer.client.secret``, ...) are
    masked like ``sasl_password``."""
    producer_config: dict[str, Any] = field(default_factory=dict)
    """Extra driver-native producer settings, as ``consumer_config``."""

    def __post_init__(self) -> None:
        self.validate()
        object.__setattr__(self, "_ready", True)

    def __setattr__(self, name: str, value: Any) -> None:
        """``app.conf.x = v``: a typo is refused like an unknown ``App(x=...)``; a known setting is
        validated at once; once a worker started (``freeze``) nothing changes under it."""
        if not self.__dict__.get("_ready"):  # the dataclass __init__ filling the fields
            object.__setattr__(self, name, value)
            return
        if name not in _FIELD_NAMES and is_faust_name(name):
            translated = translate(name, value)  # Faust's name: renamed, or accepted, or refused with why
            if translated is None:
                return
            name, value = translated
        if name not in _FIELD_NAMES:
            raise ConfigurationError(f"unknown setting {name!r}{_did_you_mean(name)}")
        if self.__dict__.get("_frozen"):
            raise ConfigurationError(f"cannot change {name!r}: the worker has started with these settings; "
                                     "set it before app.start() (in App(...), app.conf or STREAMKIT_*)")
        old = self.__dict__[name]
        object.__setattr__(self, name, value)
        try:
            self.validate()
        except ConfigurationError:
            object.__setattr__(self, name, old)
            raise

    def freeze(self, frozen: bool = True) -> None:
        """Called when a worker starts (and with False when it stopped): meanwhile every part of
        it reads these values, so none may change."""
        object.__setattr__(self, "_frozen", frozen)

    def validate(self) -> None:
        """Reject values that would only fail later, far from where they were set."""
        if isinstance(self.broker, (list, tuple)):
            object.__setattr__(self, "broker", ",".join(self.broker))
        for name, hint in _HINTS.items():  # each value as its declared type (setting_types.py)
            value = self.__dict__[name]
            converted = convert(name, hint, value, secret=name in _SECRETS)
            if converted is not value:
                object.__setattr__(self, name, converted)
        for name, enum in _ENUMS.items():
            value = self.__dict__[name]
            if not isinstance(value, enum) and value in tuple(enum):
                object.__setattr__(self, name, enum(value))
        for name in _SECRETS:  # a secret may come from its file (mounted by Kubernetes, Vault, ...)
            path = self.__dict__[f"{name}_file"]
            if path and not self.__dict__[name]:
                try:
                    value = open(path, encoding="utf-8").read().strip()
                except OSError as exc:
                    raise ConfigurationError(f"{name}_file={path!r}: {exc.strerror}") from None
                object.__setattr__(self, name, value)
        for name in _SECRETS:
            value = self.__dict__[name]
            if not isinstance(value, Secret):
                object.__setattr__(self, name, Secret(value))
        for name in ("consumer_config", "producer_config"):
            native = self.__dict__[name]
            if any(isinstance(v, str) and is_secret_key(k) for k, v in native.items()):
                object.__setattr__(self, name, {k: Secret(v) if isinstance(v, str) and is_secret_key(k) else v
                                                for k, v in native.items()})
        object.__setattr__(self, "agent_no_retry", exception_types("agent_no_retry", self.agent_no_retry))
        protocol = self.security_protocol
        if protocol and protocol.upper() != protocol:
            object.__setattr__(self, "security_protocol", protocol.upper())
        if self.security_protocol and self.security_protocol not in PROTOCOLS:
            hint = " (did you mean 'SSL'?)" if self.security_protocol in ("TLS", "SASL_TLS") else ""
            raise ConfigurationError(f"security_protocol={protocol!r}: expected one of {', '.join(PROTOCOLS)} "
                                     f"(any case){hint}")
        checks = (
            ("driver", self.driver, DRIVERS),
            ("error_policy", self.error_policy, ERROR_POLICIES),
            ("compression", self.compression, COMPRESSIONS),
            ("auto_offset_reset", self.auto_offset_reset, ("earliest", "latest")),
            ("rebalancing", self.rebalancing, tuple(Rebalancing)),
        )
        for name, value, allowed in checks:
            if value not in allowed:
                raise ConfigurationError(f"{name}={value!r}: expected one of {', '.join(allowed)}")
        if self.processing_guarantee not in GUARANTEES:
            raise ConfigurationError(
                f"processing_guarantee={self.processing_guarantee!r}: expected one of {', '.join(GUARANTEES)}"
            )
        if self.transaction_producer not in TRANSACTION_PRODUCERS:
            raise ConfigurationError(
                f"transaction_producer={self.transaction_producer!r}: expected one of {', '.join(TRANSACTION_PRODUCERS)}"
            )
        if self.exactly_once:
            if self.driver == "aiokafka" and self.transaction_producer == "worker":
                raise ConfigurationError(
                    "transaction_producer='worker' needs the consumer group metadata in the transaction "
                    "(EOS v2), which aiokafka cannot send; use 'partition' or driver='confluent'"
                )
            if self.transaction_timeout_ms <= self.commit_interval * 1000 * 2:
                raise ConfigurationError(
                    f"transaction_timeout_ms={self.transaction_timeout_ms} must exceed twice commit_interval "
                    f"({self.commit_interval}s), or transactions time out between checkpoints"
                )
        if self.driver == DriverName.AIOKAFKA and self.rebalancing == Rebalancing.INCREMENTAL:
            raise ConfigurationError(
                "rebalancing='incremental' needs driver='confluent': aiokafka speaks only the eager "
                "protocol (every rebalance revokes everything); use driver='confluent' or rebalancing='auto'")
        taken = _GROUP_PROTOCOL_KEYS & set(self.consumer_config)
        if taken:
            raise ConfigurationError(
                f"consumer_config sets {', '.join(sorted(taken))}: the worker chooses the group protocol "
                "and assignor from its topology (co-partitioned topics need range semantics); "
                "use rebalancing='eager' or 'incremental' instead")
        if self.web_ssl_keyfile and not self.web_ssl_certfile:
            raise ConfigurationError("web_ssl_keyfile is set without web_ssl_certfile: set both to serve HTTPS")
        if self.ssl_cafile and self.ssl_capath:
            raise ConfigurationError("set ssl_cafile or ssl_capath, not both: librdkafka takes one CA location")
        if self.agent_max_restarts < 0:
            raise ConfigurationError(f"agent_max_restarts={self.agent_max_restarts}: must be at least 0 (0 fails an "
                                     "agent at its first failure outside a record)")
        if self.table_cache_max_keys < 1:
            raise ConfigurationError(f"table_cache_max_keys={self.table_cache_max_keys}: must be at least 1 "
                                     "(the keys written between checkpoints)")
        if self.web_max_request_size < 1:
            raise ConfigurationError(f"web_max_request_size={self.web_max_request_size}: must be at least 1 byte")
        if self.sasl_mechanism and self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigurationError(f"sasl_mechanism={self.sasl_mechanism!r} is not supported: use PLAIN, "
                                     "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
        if self.sasl_mechanism == "OAUTHBEARER":
            self._validate_oauth()

    def _validate_oauth(self) -> None:
        """OAUTHBEARER needs a token source the chosen driver can use."""
        if isinstance(self.sasl_oauth_token, str) and self.sasl_oauth_token:
            object.__setattr__(self, "sasl_oauth_token", _import_function("sasl_oauth_token", self.sasl_oauth_token))
        if self.sasl_oauth_token is not None and not callable(self.sasl_oauth_token):
            raise ConfigurationError("sasl_oauth_token must be a function returning (token, expiry epoch seconds), "
                                     "or its 'module:function' name")
        oidc = bool(self.sasl_oauth_token_endpoint_url)
        if self.sasl_oauth_token is None and not oidc:
            raise ConfigurationError("sasl_mechanism='OAUTHBEARER' needs sasl_oauth_token (a function returning "
                                     "(token, expiry)) or, on driver='confluent', sasl_oauth_token_endpoint_url with "
                                     "sasl_oauth_client_id and sasl_oauth_client_secret")
        if oidc and self.sasl_oauth_token is None and self.driver == DriverName.AIOKAFKA:
            raise ConfigurationError("OIDC client credentials (sasl_oauth_token_endpoint_url) need driver='confluent': "
                                     "aiokafka cannot fetch tokens itself; give sasl_oauth_token instead")

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == "exactly_once"

    @property
    def isolation_level(self) -> str:
        """Exactly-once readers see only committed transactions (recovery and repartition too)."""
        return "read_committed" if self.exactly_once else "read_uncommitted"

    @property
    def transactions_per_partition(self) -> bool:
        """EOS v1 (a producer per input partition) rather than v2 (one per worker)."""
        if self.transaction_producer == "auto":
            return self.driver == "aiokafka"
        return self.transaction_producer == "partition"

    @property
    def web_url(self) -> str:
        """Where other workers reach this one's web server."""
        scheme = "https" if self.web_ssl_certfile else "http"
        return self.web_advertised_url or f"{scheme}://{self.web_host}:{self.web_port}"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port[,host:port]`` as both Kafka clients expect it (Faust's URL forms accepted)."""
        return ",".join(_server(part) for part in self.broker.replace(";", ",").split(",") if part.strip())

    @property
    def effective_security_protocol(self) -> str:
        asked = self.security_protocol
        tls = "SSL" in asked or bool(self.ssl_cafile or self.ssl_capath or self.ssl_certfile)
        sasl = "SASL" in asked or bool(self.sasl_mechanism)
        if asked == "PLAINTEXT" or asked == "SASL_PLAINTEXT":
            tls = False  # said explicitly: no TLS even with certificate files around
        if sasl:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **values: Any) -> "Settings":
        """Build settings from code values, then apply ``STREAMKIT_*`` overrides."""
        environ = dict(os.environ if environ is None else environ)
        hints = get_type_hints(cls)
        warn_unknown(environ, _FIELD_NAMES)
        values = _from_faust_names(from_faust_environment(environ, values))
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigurationError("unknown setting(s): " + ", ".join(f"{name!r}{_did_you_mean(name)}"
                                                                      for name in sorted(unknown)))
        broker = values.get("broker", "")
        broker = ",".join(broker) if isinstance(broker, (list, tuple)) else broker
        if "driver" not in values and "STREAMKIT_DRIVER" not in environ and driver_of_url(broker):
            values["driver"] = driver_of_url(broker)
        for f in dataclasses.fields(cls):
            raw = environ.get(f"STREAMKIT_{f.name.upper()}")
            if raw is not None:
                values[f.name] = convert(f.name, hints[f.name], raw, shown=f"STREAMKIT_{f.name.upper()}",
                                         secret=f.name in _SECRETS)
        return cls(**values)


def driver_of_url(broker: str) -> str | None:
    """The driver a broker URL's scheme names, as Faust's transport (``confluent://``), or None."""
    return "confluent" if broker.strip().lower().startswith("confluent://") else None


# Native consumer settings the rebalancing choice owns (both drivers' spellings).
_GROUP_PROTOCOL_KEYS = frozenset({"partition.assignment.strategy", "group.protocol", "group.remote.assignor",
                                  "partition_assignment_strategy"})
_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Settings))
_HINTS = get_type_hints(Settings)


def _from_faust_names(values: dict[str, Any]) -> dict[str, Any]:
    """``App(...)`` keywords with Faust's setting names translated (faust/settings.py); a Faust
    name and the streamkit name it renames to, both given, must agree."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name in _FIELD_NAMES or not is_faust_name(name):
            out.setdefault(name, value)
            continue
        translated = translate(name, value)
        if translated is None:
            continue
        target, converted = translated
        if target in values and values[target] != converted:
            raise ConfigurationError(f"{name}={value!r} (Faust's name for {target}) contradicts {target}={values[target]!r}")
        out[target] = converted
    return out


def _import_function(setting: str, spec: str) -> Any:
    """``module:function`` imported, or a ConfigurationError naming the setting."""
    import importlib

    module, _, attribute = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"{setting}={spec!r}: cannot import it ({exc}); expected 'module:function'") from None


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name, sorted(_FIELD_NAMES), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _server(part: str) -> str:
    """One Faust broker URL (``kafka://h:p``, ``aiokafka://``, ``h``, ``h:p``) as ``host:port``."""
    scheme, _, rest = part.strip().rpartition("://")
    rest = rest.strip("/")
    if scheme == "memory":  # the in-process broker's name, not an address
        return rest
    if rest.startswith("[") and rest.endswith("]"):  # an IPv6 literal without a port
        return f"{rest}:9092"
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    return f"{host or 'localhost'}:{port or 9092}"
