"""SASL/PLAIN with Strata tokens on the Kafka listener (broker.kafka.sasl): a standalone with
authentication and authorization on serves Kafka as SASL_PLAINTEXT; confluent-kafka with
`sasl.username=public/default`, `sasl.password=token:<jwt>` produces; a wrong token is refused
with an authentication error; a role without produce permission gets TOPIC_AUTHORIZATION_FAILED,
and a role that is no tenant admin cannot create topics."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka.conftest import tracebacks, wait_kafka_port
from tests.kafka.helpers import unique_topic
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port

CALL_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = tmp_path_factory.mktemp("kafka-sasl")
    kit = SecurityKit.create(root / "security")
    env = kit.standalone_env(tls_port=free_port(), providers="token")
    env["STRATA_AUTHENTICATION_CONNECT_TIMEOUT_MS"] = "2000"   # the SASL deadline, short for the test
    with StandaloneProcess.start(root / "data", env=env) as sa:
        wait_kafka_port(sa.kafka_bootstrap, "the secured standalone", sa.log_path)
        yield SimpleNamespace(sa=sa, kit=kit)
        problems = tracebacks([("standalone", sa.log_path)])
    assert not problems, "the standalone logged a traceback:\n" + "\n".join(problems)


def sasl(secured: SimpleNamespace, password: str, username: str = "public/default") -> dict:
    return {"bootstrap.servers": secured.sa.kafka_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": username, "sasl.password": password,
            "socket.timeout.ms": 10_000}


def produce_one(config: dict, topic: str) -> KafkaError | None:
    """Produce one record and flush: the delivery error, or None when it was stored."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 15_000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(CALL_TIMEOUT_S)
    assert outcome, "no delivery report within the bound"
    return outcome[0]


def create(config: dict, topic: str) -> None:
    admin = AdminClient(config)
    (future,) = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=CALL_TIMEOUT_S).values()
    future.result(CALL_TIMEOUT_S)


def test_a_token_in_the_plain_password_authenticates_and_produces(secured) -> None:
    topic = unique_topic("sasl")
    config = sasl(secured, "token:" + secured.kit.token(SUPERUSER))
    create(config, topic)
    assert produce_one(config, topic) is None


def test_a_wrong_token_is_an_authentication_error(secured) -> None:
    forged = secured.kit.token(SUPERUSER, key=b"not the broker's key" * 2)
    admin = AdminClient(sasl(secured, "token:" + forged))
    with pytest.raises(KafkaException) as refused:
        admin.list_topics(timeout=10)
    assert refused.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                            KafkaError._TIMED_OUT), refused.value
    errors: list[KafkaError] = []
    producer = Producer({**sasl(secured, "token:" + forged), "error_cb": errors.append})
    producer.poll(5)
    producer.flush(1)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_a_role_without_produce_permission_is_refused(secured) -> None:
    topic = unique_topic("sasl-noperm")
    create(sasl(secured, "token:" + secured.kit.token(SUPERUSER)), topic)
    err = produce_one(sasl(secured, "token:" + secured.kit.token("nobody")), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_a_role_that_is_no_tenant_admin_cannot_create_topics(secured) -> None:
    with pytest.raises(KafkaException) as refused:
        create(sasl(secured, "token:" + secured.kit.token("nobody")), unique_topic("sasl-create"))
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_client_that_never_authenticates_is_dropped(secured) -> None:
    """Every wait has a bound: a connection that sends nothing on the SASL listener is closed once
    `authentication_connect_timeout_ms` passes."""
    import socket
    import time
    host, port = secured.sa.kafka_bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.settimeout(10)
        started = time.monotonic()
        assert raw.recv(1) == b""          # closed by the broker, nothing answered
        assert time.monotonic() - started < 8


def test_a_username_naming_a_namespace_is_the_clients_namespace(secured) -> None:
    """As KoP's multi-tenant mode: `sasl.username=tenant/namespace` makes bare topic names resolve
    in that namespace (here public/kafka-sasl-ns), not in kafka_default_namespace."""
    from admin_client.client import AdminClient as RestAdmin
    from admin_client.credentials import Credentials
    token = secured.kit.token(SUPERUSER)
    rest = RestAdmin(secured.sa.admin_url, credentials=Credentials(headers={"Authorization": f"Bearer {token}"}))
    rest.call("PUT", "/admin/v2/namespaces/public/kafka-sasl-ns", {})
    topic = unique_topic("in-ns")
    config = sasl(secured, "token:" + token, username="public/kafka-sasl-ns")
    create(config, topic)
    assert produce_one(config, topic) is None
    partitions = rest.call("GET", f"/admin/v2/persistent/public/kafka-sasl-ns/{topic}/partitions")
    assert partitions["partitions"] == 1
    assert topic not in AdminClient(sasl(secured, "token:" + token)).list_topics(timeout=10).topics
