"""Which group protocol a worker uses, decided once from its settings, topology and broker.

Incremental rebalancing pauses only the partitions that move, but a Topology whose tables are
shared by several source topics needs partition p of each on the same worker (its tables'
partition p is fed by all of them). KIP-848's server-side ``range`` assignor guarantees that
and is incremental; cooperative-sticky is incremental but does not; eager range does but stops
everything on every rebalance. So:

* broker with KIP-848 (Apache Kafka 4.x) and the confluent driver: ``consumer`` + ``range``, if
  the broker accepts the group's ``session_timeout_ms`` (its minimum is 45 s by default: a
  worker that would otherwise fail over in 10 s keeps the classic protocol under ``auto``);
* otherwise confluent: cooperative-sticky, unless co-partitioned topics share tables (eager
  range then; ``rebalancing='incremental'`` refuses to start, naming the topics);
* aiokafka: eager range (the only protocol it speaks);
* memory: incremental range (the KIP-848 model), so the runtime is tested under it.

Standby replicas (``table_standby_replicas > 0``) are placed where the assignor will move a
partition when its owner leaves (runtime/membership.py): that is predictable only for range over
the members' sorted ids (classic range, and the memory broker). Cooperative-sticky and KIP-848
decide from state streamkit cannot see, so a failover would usually land on a cold worker: under
``auto`` a confluent worker with standbys uses eager range; ``rebalancing='incremental'`` keeps
incremental joins and places standbys by hashing (warned).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError
from ..settings import DriverName, Rebalancing, Settings
from ..topology import Topology
from ..transport.base import Admin, GroupProtocol


@dataclass(frozen=True)
class ProtocolChoice:
    protocol: GroupProtocol
    reason: str
    # the assignor hands a leaving member's partitions out by range over the sorted member ids
    # of those left: standbys can be placed on the worker a failover will pick
    range_failover: bool = True

    def describe(self) -> str:
        return f"rebalancing: {self.protocol.value} ({self.reason})"


def colocated_topics(topology: Topology) -> list[str]:
    """Source topics that must keep the same partition numbers on one worker: more than one
    topic feeding partitioned tables. Empty when any assignment is safe."""
    if len(topology.copartitioned) > 1 and any(not t.is_global for t in topology.tables):
        return list(topology.copartitioned)
    return []


STANDBYS_NEED_RANGE = ("standbys are placed where a failover moves each partition, which only range "
                       "assignment makes predictable")


def choose_protocol(requested: Rebalancing, driver: str, topology: Topology, broker_has_kip848: bool,
                    standbys: int = 0) -> ProtocolChoice:
    if requested == Rebalancing.EAGER:
        return ProtocolChoice(GroupProtocol.EAGER, "rebalancing='eager'")
    if driver == DriverName.AIOKAFKA:
        # Settings refuse rebalancing='incremental' with aiokafka
        return ProtocolChoice(GroupProtocol.EAGER, "aiokafka speaks only the eager protocol; driver='confluent' "
                                                   "rebalances incrementally")
    if driver == DriverName.MEMORY:
        return ProtocolChoice(GroupProtocol.CONSUMER, "memory broker: incremental range")
    if standbys and requested == Rebalancing.AUTO and any(not t.is_global for t in topology.tables):
        return ProtocolChoice(GroupProtocol.EAGER, f"table_standby_replicas={standbys}: {STANDBYS_NEED_RANGE}; "
                                                   "rebalancing='incremental' prefers incremental joins instead")
    if broker_has_kip848:
        return ProtocolChoice(GroupProtocol.CONSUMER, "the broker speaks KIP-848: incremental, and its range "
                                                      "assignor keeps co-partitioned topics together",
                              range_failover=False)
    together = colocated_topics(topology)
    if not together:
        return ProtocolChoice(GroupProtocol.COOPERATIVE, "KIP-848 not usable on this broker; no tables shared by "
                                                         "several source topics, so cooperative-sticky is safe",
                              range_failover=False)
    why = (f"topics {', '.join(together)} feed the same tables, so partition p of each must stay on one worker: "
           "cooperative-sticky does not guarantee that and KIP-848's range assignor is not usable on this broker")
    if requested == Rebalancing.INCREMENTAL:
        raise ConfigurationError(f"rebalancing='incremental' is not safe here: {why}; use rebalancing='auto' "
                                 "(eager range) or a broker with KIP-848 (Apache Kafka 4.x)")
    return ProtocolChoice(GroupProtocol.EAGER, why)


async def apply_group_timeouts(admin: Admin, group: str, settings: Settings) -> list[str]:
    """Under KIP-848 the broker owns the session timeout and heartbeat interval: ask it to use
    ``session_timeout_ms``/``heartbeat_interval_ms`` for this group. Returns what it refused
    (its minimum is above the value: a 45 s session by default), one line each."""
    wanted = {"consumer.session.timeout.ms": str(settings.session_timeout_ms),
              "consumer.heartbeat.interval.ms": str(settings.heartbeat_interval_ms)}
    refused = await admin.set_group_config(group, wanted)
    return [f"{name}={wanted[name]} ({why})" for name, why in refused.items()]


def refused_timeouts_message(refused: list[str], requested: Rebalancing) -> str:
    what = "; ".join(refused)
    if "authorization failed" in what.lower():  # the principal lacks AlterConfigs on its group
        return (f"the broker speaks KIP-848 but refused {what}: the principal needs AlterConfigs on its group "
                "(`streamkit acls` prints it); keeping the classic protocol")
    if requested == Rebalancing.INCREMENTAL:
        return (f"rebalancing='incremental' uses KIP-848, and the broker refused {what}: its own group.consumer.* "
                "timeouts apply, so a crashed worker's partitions move later than session_timeout_ms says; "
                "lower group.consumer.min.session.timeout.ms / group.consumer.min.heartbeat.interval.ms on "
                "the broker")
    return (f"the broker speaks KIP-848 but refused {what}: keeping the classic protocol so that a crashed "
            "worker's partitions move after session_timeout_ms; lower group.consumer.min.session.timeout.ms / "
            "group.consumer.min.heartbeat.interval.ms on the broker to use KIP-848, or set "
            "rebalancing='incremental' to use it with the broker's timeouts")
