"""This broker's load report: what it registers for placement and shedding (Pulsar's LocalBrokerData).

`LoadMeter.report(identity, topics, ...)` returns the JSON fields Pulsar's modular load manager publishes under
`/loadbalance/brokers/<host>:<webPort>`. Identity: Pulsar's LocalBrokerData is identified by its
four URLs (`webServiceUrl`, `webServiceUrlTls`, `pulsarServiceUrl`, `pulsarServiceUrlTls`: its
equals/hashCode), and Pulsar 3.x names a broker by its brokerId `<advertisedAddress>:<webPort>`,
the registry key. So `brokerId` here is that key, the same string `brokers list` lists and the
leader's `brokerId` (`broker.cluster.load_manager`) names: never the binary port. Also Pulsar's
`loadReportType` "LocalBrokerData", `brokerVersionString`, `persistentTopicsEnabled` true and
`nonPersistentTopicsEnabled` true (`broker.nonpersistent.topic`). Load: message and
byte rates in and out (summed over the
loaded topics' sampled rates, `broker.topics.rates.rates`), topic, bundle, producer, consumer and
connection counts, and CPU as the process's CPU time over wall time since the previous report
(percent of one core; `limit` is 100 × the cores it may use).

What must hold: a report is cheap (one pass over loaded topics, no I/O) and every number is finite
and non-negative.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from broker import SERVER_VERSION
from broker.topics.rates import out_rates, rates

if TYPE_CHECKING:
    from broker.cluster.identity import BrokerIdentity
    from broker.topics.topic import PersistentTopic


class LoadMeter:
    def __init__(self) -> None:
        self._cpu_s = time.process_time()
        self._wall_s = time.monotonic()
        self.started_ms = int(time.time() * 1000)

    def _cpu_percent(self) -> float:
        cpu_s, wall_s = time.process_time(), time.monotonic()
        spent, elapsed = cpu_s - self._cpu_s, wall_s - self._wall_s
        self._cpu_s, self._wall_s = cpu_s, wall_s
        return max(0.0, 100.0 * spent / elapsed) if elapsed > 0 else 0.0

    def report(self, identity: BrokerIdentity, topics: Collection[PersistentTopic], connections: int,
               bundles: list[str]) -> dict:
        rate_in = rate_out = bytes_in = bytes_out = 0.0
        producers = consumers = 0
        for topic in list(topics):
            m_in, b_in = rates(topic)
            m_out, b_out = out_rates(topic)
            rate_in, bytes_in = rate_in + m_in, bytes_in + b_in
            rate_out, bytes_out = rate_out + m_out, bytes_out + b_out
            producers += len(topic.producers)
            consumers += sum(len(s.consumers) for s in topic.subscriptions.values())
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return {
            "webServiceUrl": identity.web_url,
            "webServiceUrlTls": identity.web_url_tls,
            "pulsarServiceUrl": identity.service_url,
            "pulsarServiceUrlTls": identity.service_url_tls,
            "advertisedListeners": identity.listeners.to_json(),
            "kafkaListeners": identity.kafka_listeners,
            "brokerId": identity.registry_key,        # host:webPort, as `brokers list` names it
            "loadReportType": "LocalBrokerData",
            "brokerVersionString": SERVER_VERSION,
            "persistentTopicsEnabled": True,
            "nonPersistentTopicsEnabled": True,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "startTimestamp": self.started_ms,
            "lastUpdate": int(time.time() * 1000),
            "msgRateIn": rate_in,
            "msgRateOut": rate_out,
            "msgThroughputIn": bytes_in,
            "msgThroughputOut": bytes_out,
            "numTopics": len(topics),
            "numBundles": len(bundles),
            "numProducers": producers,
            "numConsumers": consumers,
            "connections": connections,
            "cpu": {"usage": self._cpu_percent(), "limit": 100.0 * cores},
            "bundles": bundles,
        }
