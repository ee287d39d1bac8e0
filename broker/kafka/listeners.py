"""This broker's Kafka listeners and how other brokers' are learnt: Kafka's `advertised.listeners`.

A broker serves Kafka on up to two ports: `kafka_port` (PLAINTEXT, or SASL_PLAINTEXT when
authentication is on) and `kafka_tls_port` (SSL, or SASL_SSL). Each has a listener name (the
security protocol) and the address clients are told: `kafka_advertised_listeners`
("PLAINTEXT://host:port,SSL://host:port") when set, else `broker_advertised_host` with the bound
port. The addresses go into the broker's load report (`kafkaListeners`), so any broker can answer
Metadata with every broker's address for the listener the client came through.

A broker's Kafka node id is a stable positive int32 of its service URL (Murmur3, as KoP did for
its advertised address): the same broker keeps its id across restarts, and every broker computes
the same id for it.

What must hold: listener names are one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; a name appears
at most once; an advertised address has a host and a port in 1..65535.
"""

from __future__ import annotations

from dataclasses import dataclass

import mmh3

from common.config import Config
from common.errors import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class KafkaListener:
    name: str            # the security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    host: str            # advertised host
    port: int            # advertised port

    @property
    def tls(self) -> bool:
        return self.name in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.name.startswith("SASL_")


@dataclass(frozen=True)
class KafkaListeners:
    plain: KafkaListener | None      # kafka_port's listener (None: not served)
    tls: KafkaListener | None        # kafka_tls_port's listener (None: not served)

    def all(self) -> list[KafkaListener]:
        return [x for x in (self.plain, self.tls) if x is not None]

    def to_json(self) -> dict[str, str]:
        return {x.name: f"{x.host}:{x.port}" for x in self.all()}


def parse_advertised(text: str) -> dict[str, tuple[str, int]]:
    """'PLAINTEXT://h:p,SSL://h:p' -> {name: (host, port)}; ConfigError when malformed."""
    out: dict[str, tuple[str, int]] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, address = item.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not sep or name not in PROTOCOLS or not colon or not host or not port_text.isdigit():
            raise ConfigError("kafka_advertised_listeners: expected NAME://host:port, NAME one of "
                              + ", ".join(PROTOCOLS), item=item)
        port = int(port_text)
        if not 0 < port <= 65535 or name in out:
            raise ConfigError("kafka_advertised_listeners: bad port or a listener named twice", item=item)
        out[name] = (host.strip("[]"), port)
    return out


def build(config: Config, plain_port: int, tls_port: int, sasl: bool) -> KafkaListeners:
    """The listeners of the bound ports (-1: not served), with their advertised addresses."""
    advertised = parse_advertised(config.kafka_advertised_listeners)
    host = config.broker_advertised_host

    def one(port: int, tls: bool) -> KafkaListener | None:
        if port == -1:
            return None
        name = ("SASL_SSL" if sasl else "SSL") if tls else ("SASL_PLAINTEXT" if sasl else "PLAINTEXT")
        ad_host, ad_port = advertised.get(name, (host, port))
        return KafkaListener(name, ad_host, ad_port)

    return KafkaListeners(one(plain_port, False), one(tls_port, True))


def decode(report_value: object) -> dict[str, tuple[str, int]]:
    """Another broker's `kafkaListeners` report field ({} when absent or malformed)."""
    if not isinstance(report_value, dict):
        return {}
    out: dict[str, tuple[str, int]] = {}
    for name, address in report_value.items():
        if isinstance(name, str) and isinstance(address, str):
            host, _, port = address.rpartition(":")
            if host and port.isdigit():
                out[name] = (host, int(port))
    return out


def node_id(service_url: str) -> int:
    """A broker's Kafka node id: stable, positive, the same on every broker."""
    return mmh3.hash(service_url, signed=False) & 0x7FFFFFFF
