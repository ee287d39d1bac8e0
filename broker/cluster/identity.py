"""Who this broker is to clients and to other brokers: its URLs and its names.

Built once by the composition root (`broker.server`) after every port is bound, so each field is
final: the registry, the ownership records, the load report and lookups all read it from here.
(Before, the service was built first and the URLs patched onto it once the admin port listened.)

What must hold: `service_url` is the broker's id in ownership records (its plain port's URL, or
the TLS port's when only TLS is served, or the internal listener's); `registry_key` is
`<advertised host>:<admin port>`, Pulsar's brokerId.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.cluster.listeners import Listeners


@dataclass(frozen=True)
class BrokerIdentity:
    broker_id: str          # "<advertised host>:<binary port>"; names generated producers
    service_url: str        # pulsar://host:port (or pulsar+ssl:// when only TLS is served)
    service_url_tls: str    # pulsar+ssl://host:port of the TLS port ('' : not served)
    web_url: str            # the admin URL: http://host:port (https:// when only TLS is served)
    web_url_tls: str        # https://host:port of the admin TLS port ('' : not served)
    registry_key: str       # "<advertised host>:<admin port>": the registry key, Pulsar's brokerId
    listeners: Listeners    # advertised listeners (empty when none are configured)
    # Kafka listeners: name (PLAINTEXT, SSL, ...) -> advertised "host:port" ({}: Kafka not served)
    kafka_listeners: dict[str, str] = field(default_factory=dict)
