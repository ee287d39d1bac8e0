"""Kafka listeners (broker.kafka.listeners) and the Kafka settings' checks: advertised addresses,
security protocols, node ids every broker computes alike, and refusals of malformed settings."""

from __future__ import annotations

import pytest

from broker.kafka import listeners as kl
from common.config import load_config
from common.errors import ConfigError


def test_advertised_listeners_parse_and_refuse():
    assert kl.parse_advertised("PLAINTEXT://kafka.example:9092, SSL://[::1]:9093") == {
        "PLAINTEXT": ("kafka.example", 9092), "SSL": ("::1", 9093)}
    assert kl.parse_advertised("") == {}
    for bad in ("HTTP://h:1", "PLAINTEXT://h", "PLAINTEXT://:9092", "PLAINTEXT://h:0", "PLAINTEXT://h:99999",
                "PLAINTEXT://h:1,PLAINTEXT://h:2", "h:9092"):
        with pytest.raises(ConfigError):
            kl.parse_advertised(bad)


def test_listener_names_follow_tls_and_sasl():
    config = load_config(None, broker_advertised_host="b1", kafka_advertised_listeners="SASL_SSL://public:19093")
    both = kl.build(config, 9092, 9093, sasl=True)
    assert (both.plain, both.tls) == (kl.KafkaListener("SASL_PLAINTEXT", "b1", 9092),
                                      kl.KafkaListener("SASL_SSL", "public", 19093))
    assert both.tls is not None and both.tls.tls and both.tls.sasl
    plain = kl.build(config, 9092, -1, sasl=False)
    assert plain.tls is None and plain.to_json() == {"PLAINTEXT": "b1:9092"}
    assert kl.decode(plain.to_json()) == {"PLAINTEXT": ("b1", 9092)}
    assert kl.decode("junk") == {} and kl.decode({"PLAINTEXT": "no-port"}) == {}


def test_node_ids_are_stable_positive_and_distinct():
    a, b = kl.node_id("pulsar://10.0.0.1:6650"), kl.node_id("pulsar://10.0.0.2:6650")
    assert a == kl.node_id("pulsar://10.0.0.1:6650") and a != b
    assert 0 <= a <= 2**31 - 1 and 0 <= b <= 2**31 - 1


def test_the_default_namespace_must_be_tenant_and_namespace():
    assert load_config(None).kafka_default_namespace == "public/default"
    for bad in ("public", "a/b/c", "", "a/"):
        with pytest.raises(ConfigError):
            load_config(None, kafka_default_namespace=bad)
