"""Bad input over a plain socket gets Kafka's answer, and nothing already stored changes (KAFKA-FACTS
§2, §3.2): a malformed request, an unknown api key, an unsupported version (ApiVersions: a v0 body with
UNSUPPORTED_VERSION 35; others: the connection closed), a batch with a bad CRC (CORRUPT_MESSAGE 2), an
oversized batch (MESSAGE_TOO_LARGE 10). Records are counted by reading the partition with kafka-python
before and after.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from tests.kafka import wire
from tests.kafka.helpers import create_partitioned, unique_topic
from tests.kafka.test_kafka_python import KafkaPython
from tests.kafka.wire import RawKafka, record_batch, request_header, with_bad_crc

STORED = 5


@pytest.fixture(scope="module")
def topic(standalone, bootstrap: str) -> str:
    name = unique_topic("bad-wire")
    create_partitioned(standalone.admin_url, name, 1)
    with RawKafka.to(bootstrap) as conn:
        done = conn.produce(name, 0, record_batch([(None, f"kept-{i}".encode()) for i in range(STORED)]))
        assert done.error == wire.NONE, done
    return name


@pytest.fixture
def unchanged(bootstrap: str, topic: str) -> Iterator[None]:
    """The partition holds the same records after the test as before."""
    reader = KafkaPython(bootstrap)
    before = [(r.offset, r.value) for r in reader.consume(topic, 0, ("earliest", 0), expect=STORED)]
    yield
    after = [(r.offset, r.value) for r in reader.consume(topic, 0, ("earliest", 0), expect=STORED)]
    assert after == before


def still_serves(bootstrap: str) -> None:
    with RawKafka.to(bootstrap) as conn:
        error, keys = conn.api_versions(0)
        assert error == wire.NONE and wire.API_PRODUCE in keys


def test_apiversions_of_an_unknown_version_gets_a_v0_body_with_35(bootstrap: str, unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        error, keys = conn.api_versions(version=99)
        assert error == wire.UNSUPPORTED_VERSION
        assert wire.API_API_VERSIONS in keys and keys[wire.API_API_VERSIONS][0] == 0, keys
    still_serves(bootstrap)


def test_an_unsupported_version_of_another_api_closes_the_connection(bootstrap: str, topic: str,
                                                                       unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(request_header(wire.API_PRODUCE, 999, 1) + b"\x00" * 16)
        frame = conn.recv_frame()
        assert frame is None, f"answered {frame!r} instead of closing"
    still_serves(bootstrap)


def test_an_unknown_api_key_closes_the_connection(bootstrap: str, unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(request_header(31_000, 0, 1))
        assert conn.recv_frame() is None
    still_serves(bootstrap)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x00\x00", request_header(0, 7, 1) + b"\xff\xff\xff"],
                         ids=["empty", "1-byte", "short-header", "truncated-produce"])
def test_a_malformed_request_closes_the_connection(bootstrap: str, payload: bytes, unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(payload)
        assert conn.recv_frame() is None
    still_serves(bootstrap)


def test_a_negative_frame_size_closes_the_connection(bootstrap: str, unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        conn.sock.sendall(struct.pack(">i", -5))
        assert conn.closed_by_peer()
    still_serves(bootstrap)


def test_a_batch_with_a_bad_crc_is_corrupt_message(bootstrap: str, topic: str, unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        bad = with_bad_crc(record_batch([(b"k", b"never stored")]))
        answer = conn.produce(topic, 0, bad)
        assert answer.error == wire.CORRUPT_MESSAGE, answer


def test_an_oversized_batch_is_message_too_large(bootstrap: str, topic: str, unchanged: None) -> None:
    """One 6 MiB record: more than a topic's max.message.bytes (Kafka's 1 MiB default; Pulsar's 5 MiB)."""
    with RawKafka.to(bootstrap) as conn:
        answer = conn.produce(topic, 0, record_batch([(None, b"x" * (6 * 1024 * 1024))]))
        assert answer.error == wire.MESSAGE_TOO_LARGE, answer
