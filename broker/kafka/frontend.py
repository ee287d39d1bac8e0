"""What the Kafka front end serves its connections with, built once by the composition root.

Like the Pulsar front end's `FrontEnd`, it names exactly the collaborators the Kafka handlers
use: the topics (service), ownership (who leads a partition), the broker registry (every broker's
Kafka listeners), authentication and authorization, the Kafka catalog of topics, the producer-id
allocator, the per-partition producer states, the append waiters of long-polling fetches and the
group coordinator.

What must hold: every field is set before the first Kafka connection is accepted; none changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.kafka.listeners import KafkaListeners
from broker.kafka.topics import Catalog

if TYPE_CHECKING:
    from auth.service import AuthenticationService
    from broker.cluster.ownership import Ownership
    from broker.cluster.registry import BrokerRegistry
    from broker.context import BrokerContext
    from broker.kafka.appends import AppendWaiters
    from broker.kafka.groups.coordinator import GroupCoordinator
    from broker.kafka.producer_ids import ProducerIdAllocator
    from broker.kafka.producer_states import ProducerStates
    from broker.kafka.stats import KafkaStats
    from broker.security.authorization import AuthorizationService
    from broker.service import BrokerService


@dataclass(frozen=True)
class KafkaFrontEnd:
    ctx: BrokerContext
    service: BrokerService                  # loading topics, partitions
    ownership: Ownership                    # which broker leads a partition (its bundle's owner)
    registry: BrokerRegistry                # every live broker and its Kafka listeners
    authentication: AuthenticationService   # SASL/PLAIN's token check
    authorization: AuthorizationService     # what a role may do
    listeners: KafkaListeners               # this broker's Kafka listeners
    catalog: Catalog                        # Kafka topics and their partition counts
    producer_ids: ProducerIdAllocator       # InitProducerId
    producer_states: ProducerStates         # idempotence state per partition
    appends: AppendWaiters                  # fetches waiting for new entries
    stats: KafkaStats                       # requests, traffic, Kafka producers and consumers per topic
    groups: GroupCoordinator                # the consumer groups this broker coordinates
    cluster_id: str = field(default="strata")
    connections: set = field(default_factory=set)   # live KafkaConnections (stats, `strata top`)
