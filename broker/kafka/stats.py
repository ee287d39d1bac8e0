"""What the Kafka front end counts: requests per API, produce and fetch traffic, and who is
producing to and fetching from each topic (shown by `topics stats` beside Pulsar's producers and
consumers, and by `strata top`).

A Kafka client has no producer or consumer object on the broker: it sends Produce and Fetch
requests over a connection. So a *Kafka producer* of a topic is a (connection, producer id or
client id) that produced to it, and a *Kafka consumer* a connection that fetched from it; each is
kept while its connection lives and it was active within `ACTIVE_S`.

What must hold: counters only grow; at most `CLIENTS_PER_TOPIC_MAX` clients are kept per topic
(the least recently active one is dropped), so a client churning connections cannot grow memory.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from broker.topics.topic import PersistentTopic

ACTIVE_S = 60.0
CLIENTS_PER_TOPIC_MAX = 1_000


@dataclass
class KafkaClient:
    """One Kafka producer or consumer of a topic."""

    address: str            # the client's ip:port
    client_id: str          # the client's client.id ('' when it sent none)
    producer_id: int        # idempotent producers: their id; -1 otherwise (and for consumers)
    connected_since_ms: int
    messages: int = 0
    bytes: int = 0
    last_ms: int = 0


class KafkaStats:
    def __init__(self, clock) -> None:
        self._clock = clock
        self.requests: collections.Counter[int] = collections.Counter()       # api key -> requests
        self.produce_requests = 0
        self.produced_messages = 0
        self.produced_bytes = 0
        self.fetched_messages = 0
        self.fetched_bytes = 0
        self._producers: dict[str, collections.OrderedDict[tuple, KafkaClient]] = {}
        self._consumers: dict[str, collections.OrderedDict[tuple, KafkaClient]] = {}

    def _touch(self, table: dict, topic: str, key: tuple, conn: KafkaConnection, pid: int) -> KafkaClient:
        clients = table.setdefault(topic, collections.OrderedDict())
        client = clients.get(key)
        if client is None:
            client = KafkaClient(conn.peer, conn.client_id or "", pid, conn.connected_ms)
            clients[key] = client
            while len(clients) > CLIENTS_PER_TOPIC_MAX:
                clients.popitem(last=False)
        else:
            clients.move_to_end(key)
        client.last_ms = self._clock.wall_ms()
        return client

    def produced(self, topic: PersistentTopic, conn: KafkaConnection, messages: int, size: int,
                 producer_id: int = -1) -> None:
        self.produced_messages += messages
        self.produced_bytes += size
        key = (id(conn), producer_id if producer_id >= 0 else conn.client_id)
        client = self._touch(self._producers, str(topic.name), key, conn, producer_id)
        client.messages += messages
        client.bytes += size

    def fetched(self, conn: KafkaConnection, parts: list[Any]) -> None:
        for part in parts:
            if part.topic is None or not part.size:
                if part.topic is not None:
                    self._touch(self._consumers, str(part.topic.name), (id(conn),), conn, -1)
                continue
            self.fetched_bytes += part.size
            client = self._touch(self._consumers, str(part.topic.name), (id(conn),), conn, -1)
            client.bytes += part.size
            client.messages += part.messages
            self.fetched_messages += part.messages

    def _active(self, table: dict, topic: str, live: set[int]) -> list[KafkaClient]:
        clients = table.get(topic)
        if not clients:
            return []
        horizon = self._clock.wall_ms() - ACTIVE_S * 1000
        gone = [k for k, c in clients.items() if k[0] not in live or c.last_ms < horizon]
        for key in gone:
            del clients[key]
        return list(clients.values())

    def producers(self, topic: str, live: set[int]) -> list[KafkaClient]:
        """The topic's active Kafka producers (`live`: ids of the open connections)."""
        return self._active(self._producers, topic, live)

    def consumers(self, topic: str, live: set[int]) -> list[KafkaClient]:
        return self._active(self._consumers, topic, live)
