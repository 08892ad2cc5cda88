"""Which group protocol a worker uses, decided once from its settings, topology and broker.

Incremental rebalancing pauses only the partitions that move, but a Topology whose tables are
shared by several source topics needs partition p of each on the same worker (its tables'
partition p is fed by all of them). KIP-848's server-side ``range`` assignor guarantees that
and is incremental; cooperative-sticky is incremental but does not; eager range does but stops
everything on every rebalance. So:

* broker with KIP-848 (Apache Kafka 4.x) and the confluent driver: ``consumer`` + ``range``;
* otherwise confluent: cooperative-sticky, unless co-partitioned topics share tables (eager
  range then; ``rebalancing='incremental'`` refuses to start, naming the topics);
* aiokafka: eager range (the only protocol it speaks);
* memory: incremental range (the KIP-848 model), so the runtime is tested under it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError
from ..settings import DriverName, Rebalancing
from ..topology import Topology
from ..transport.base import GroupProtocol


@dataclass(frozen=True)
class ProtocolChoice:
    protocol: GroupProtocol
    reason: str

    def describe(self) -> str:
        return f"rebalancing: {self.protocol.value} ({self.reason})"


def colocated_topics(topology: Topology) -> list[str]:
    """Source topics that must keep the same partition numbers on one worker: more than one
    topic feeding partitioned tables. Empty when any assignment is safe."""
    if len(topology.copartitioned) > 1 and any(not t.is_global for t in topology.tables):
        return list(topology.copartitioned)
    return []


def choose_protocol(requested: Rebalancing, driver: str, topology: Topology, broker_has_kip848: bool) -> ProtocolChoice:
    if requested == Rebalancing.EAGER:
        return ProtocolChoice(GroupProtocol.EAGER, "rebalancing='eager'")
    if driver == DriverName.AIOKAFKA:
        # Settings refuse rebalancing='incremental' with aiokafka
        return ProtocolChoice(GroupProtocol.EAGER, "aiokafka speaks only the eager protocol; driver='confluent' "
                                                   "rebalances incrementally")
    if driver == DriverName.MEMORY:
        return ProtocolChoice(GroupProtocol.CONSUMER, "memory broker: incremental range")
    if broker_has_kip848:
        return ProtocolChoice(GroupProtocol.CONSUMER, "the broker speaks KIP-848: incremental, and its range "
                                                      "assignor keeps co-partitioned topics together")
    together = colocated_topics(topology)
    if not together:
        return ProtocolChoice(GroupProtocol.COOPERATIVE, "the broker lacks KIP-848; no tables shared by several "
                                                         "source topics, so cooperative-sticky is safe")
    why = (f"topics {', '.join(together)} feed the same tables, so partition p of each must stay on one worker: "
           "cooperative-sticky does not guarantee that and this broker lacks KIP-848's range assignor")
    if requested == Rebalancing.INCREMENTAL:
        raise ConfigurationError(f"rebalancing='incremental' is not safe here: {why}; use rebalancing='auto' "
                                 "(eager range) or a broker with KIP-848 (Apache Kafka 4.x)")
    return ProtocolChoice(GroupProtocol.EAGER, why)
