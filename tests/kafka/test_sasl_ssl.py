"""Kafka over TLS: `strata standalone --secure` serves Kafka as SASL_SSL (TLS with the broker's
certificate, then SASL/PLAIN with a Strata token), and no plaintext Kafka port unless asked.

confluent-kafka checks the certificate against the standalone's CA and the advertised host name,
authenticates with `token:<superuser token>` and produces and fetches a record; a client that does
not trust the CA never gets through the handshake."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka.conftest import tracebacks
from tests.kafka.helpers import unique_topic
from tests.support.standalone_proc import StandaloneProcess

CALL_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("kafka-ssl") / "data", secure=True) as sa:
        host, port = sa.kafka_bootstrap.split(":")
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Kafka TLS port never accepted a connection"
                time.sleep(0.1)
        yield sa
        problems = tracebacks([("standalone", sa.log_path)])
    assert not problems, "the standalone logged a traceback:\n" + "\n".join(problems)


def _config(sa: StandaloneProcess, ca: str | None = None) -> dict:
    token = (sa.security_dir / "admin.token").read_text().strip()
    return {"bootstrap.servers": sa.kafka_bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": ca or str(sa.security_dir / "ca.cert.pem"), "sasl.mechanism": "PLAIN",
            "sasl.username": "public/default", "sasl.password": "token:" + token, "socket.timeout.ms": 10_000}


def test_sasl_ssl_produces_and_fetches(secure: StandaloneProcess) -> None:
    topic = unique_topic("ssl")
    config = _config(secure)
    admin = AdminClient(config)   # held until its future is done (a dropped one fails it with _DESTROY)
    (created,) = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=CALL_TIMEOUT_S).values()
    created.result(CALL_TIMEOUT_S)
    outcome: list = []
    producer = Producer({**config, "message.timeout.ms": 15_000})
    producer.produce(topic, b"over tls", key=b"k", on_delivery=lambda err, msg: outcome.append((err, msg.offset())))
    producer.flush(CALL_TIMEOUT_S)
    assert outcome == [(None, 0)]
    consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + CALL_TIMEOUT_S
        got = None
        while got is None and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                got = msg
        assert got is not None and (got.key(), got.value(), got.offset()) == (b"k", b"over tls", 0)
    finally:
        consumer.close()


def test_an_untrusted_certificate_is_refused(secure: StandaloneProcess, tmp_path) -> None:
    import trustme
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    errors: list[KafkaError] = []
    producer = Producer({**_config(secure, str(other_ca)), "error_cb": errors.append})
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.5)
    assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for e in errors), \
        errors
