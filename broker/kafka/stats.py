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
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from common.human import iso_ms
from wire.kafka.schemas import REQUESTS

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from broker.topics.topic import PersistentTopic

ACTIVE_S = 60.0
RATE_WINDOW_S = 10.0
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
    first_ms: int = 0         # first activity (rates average from here, over at most RATE_WINDOW_S)
    window_messages: int = 0  # messages and bytes since `window_ms`, for the rate
    window_bytes: int = 0
    window_ms: int = 0

    def count(self, messages: int, size: int, now_ms: int) -> None:
        if now_ms - self.window_ms > RATE_WINDOW_S * 1000:
            self.window_ms, self.window_messages, self.window_bytes = now_ms, 0, 0
        self.messages += messages
        self.bytes += size
        self.window_messages += messages
        self.window_bytes += size

    def rates(self, now_ms: int) -> tuple[float, float]:
        elapsed_s = max(1.0, (now_ms - self.window_ms) / 1000)
        return self.window_messages / elapsed_s, self.window_bytes / elapsed_s

    def publisher_json(self, now_ms: int) -> dict:
        rate, throughput = self.rates(now_ms)
        name = f"kafka-{self.producer_id}" if self.producer_id >= 0 else f"kafka-{self.client_id or 'anonymous'}"
        return {"producerName": name, "producerId": self.producer_id, "msgRateIn": rate, "msgThroughputIn": throughput,
                "averageMsgSize": throughput / rate if rate > 0 else 0.0, "msgInCounter": self.messages,
                "bytesInCounter": self.bytes, "address": f"/{self.address}", "connectedSince":
                iso_ms(self.connected_since_ms), "clientVersion": self.client_id, "accessMode": "Shared",
                "protocol": "kafka"}

    def consumer_json(self, now_ms: int) -> dict:
        rate, throughput = self.rates(now_ms)
        return {"consumerName": self.client_id or "kafka", "msgRateOut": rate, "msgThroughputOut": throughput,
                "msgOutCounter": self.messages, "bytesOutCounter": self.bytes, "address": f"/{self.address}",
                "connectedSince": iso_ms(self.connected_since_ms), "clientVersion": self.client_id,
                "lastConsumedTimestamp": self.last_ms, "protocol": "kafka"}


class KafkaStats:
    def __init__(self, clock, live_connections) -> None:
        self._clock = clock
        self.live_connections = live_connections        # () -> the open Kafka connections
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
            client.window_ms = self._clock.wall_ms()
            clients[key] = client
            while len(clients) > CLIENTS_PER_TOPIC_MAX:
                clients.popitem(last=False)
        else:
            clients.move_to_end(key)
        client.last_ms = self._clock.wall_ms()
        return client

    def _register(self, topic: PersistentTopic) -> None:
        if "kafka" not in topic.protocol_clients:
            topic.protocol_clients["kafka"] = functools.partial(self.report, str(topic.name))

    def report(self, topic: str) -> dict:
        """The topic's Kafka publishers and consumers, in topic stats' shape."""
        live = {id(c) for c in self.live_connections()}
        now_ms = self._clock.wall_ms()
        return {"publishers": [c.publisher_json(now_ms) for c in self.producers(topic, live)],
                "consumers": [c.consumer_json(now_ms) for c in self.consumers(topic, live)]}

    def produced(self, topic: PersistentTopic, conn: KafkaConnection, messages: int, size: int,
                 producer_id: int = -1) -> None:
        self.produced_messages += messages
        self.produced_bytes += size
        key = (id(conn), producer_id if producer_id >= 0 else conn.client_id)
        client = self._touch(self._producers, str(topic.name), key, conn, producer_id)
        client.count(messages, size, client.last_ms)
        self._register(topic)

    def fetched(self, conn: KafkaConnection, parts: list[Any]) -> None:
        for part in parts:
            topic = part.topic
            if topic is None:
                continue
            client = self._touch(self._consumers, str(topic.name), (id(conn),), conn, -1)
            self._register(topic)
            if not part.size:
                continue
            self.fetched_bytes += part.size
            self.fetched_messages += part.messages
            client.count(part.messages, part.size, client.last_ms)
            topic.msg_out_outside_subscriptions += part.messages
            topic.bytes_out_outside_subscriptions += part.size

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


def api_name(api_key: int) -> str:
    known = REQUESTS.get(api_key)
    return known["name"].removesuffix("Request") if known else str(api_key)


def families(stats: KafkaStats, cluster: str) -> list[Metric]:
    """The Kafka listener's /metrics families, each with the label protocol="kafka"."""
    requests = CounterMetricFamily("strata_protocol_requests", "requests served, per protocol and API",
                                   labels=["cluster", "protocol", "api"])
    for key, count in sorted(stats.requests.items()):
        requests.add_metric([cluster, "kafka", api_name(key)], count)
    out: list[Metric] = [requests]
    for name, doc, value in (
            ("strata_protocol_in_messages", "messages produced, per protocol", stats.produced_messages),
            ("strata_protocol_in_bytes", "stored bytes produced, per protocol", stats.produced_bytes),
            ("strata_protocol_out_messages", "messages fetched outside subscriptions, per protocol",
             stats.fetched_messages),
            ("strata_protocol_out_bytes", "bytes fetched outside subscriptions, per protocol", stats.fetched_bytes)):
        family = CounterMetricFamily(name, doc, labels=["cluster", "protocol"])
        family.add_metric([cluster, "kafka"], value)
        out.append(family)
    connections = GaugeMetricFamily("strata_protocol_connections", "open client connections, per protocol",
                                    labels=["cluster", "protocol"])
    connections.add_metric([cluster, "kafka"], len(stats.live_connections()))
    out.append(connections)
    return out
