"""What the Pulsar front end serves its clients with: the collaborators every connection gets.

Built once by the composition root (`broker.server`) and handed to each `ServerConnection`, so a
connection and the command handlers it routes to name exactly what they use (the loaded topics,
the non-persistent ones, ownership for lookups, authentication and authorization, the topic-list
watchers) instead of reaching through the service for it.

What must hold: every field is set before the first connection is accepted, and none changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auth.service import AuthenticationService
    from broker.cluster.ownership import Ownership
    from broker.context import BrokerContext
    from broker.nonpersistent.topic import NonPersistentTopics
    from broker.protocol.topic_lists import TopicListRegistry
    from broker.records.tenancy import NamespaceCache
    from broker.security.authorization import AuthorizationService
    from broker.service import BrokerService


@dataclass(frozen=True)
class FrontEnd:
    ctx: BrokerContext
    service: BrokerService                  # loading persistent topics, producer names, partitions
    non_persistent: NonPersistentTopics     # the live non-persistent topics
    ownership: Ownership                    # where a lookup sends the client
    namespaces: NamespaceCache              # which namespaces exist
    authentication: AuthenticationService   # who a client is (CONNECT, AUTH_RESPONSE)
    authorization: AuthorizationService     # what a role may do
    topic_lists: TopicListRegistry          # WATCH_TOPIC_LIST watchers
