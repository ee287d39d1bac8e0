"""Bad input over a plain socket gets an answer, and nothing already stored changes (KAFKA-FACTS §2,
§3.2; the issue: "Anything else gets Kafka's UNSUPPORTED_VERSION/INVALID_REQUEST, never a closed socket
without an answer"):

- a request whose header is readable but which cannot be served gets a reply frame of [correlation id]
  [int16 error] and the connection keeps serving: an unsupported version 35 (ApiVersions: a whole v0 body
  with 35, KIP-511), an unknown api key or a body that does not parse 42 INVALID_REQUEST. (A Kafka broker
  closes the connection for all but ApiVersions; the issue chose an answer instead.)
- a frame that is not a request at all (header unreadable, negative size, size over the limit) closes the
  connection;
- a batch with a bad CRC: CORRUPT_MESSAGE 2; an oversized batch: MESSAGE_TOO_LARGE 10.

Records are counted by reading the partition with kafka-python before and after.
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


def error_reply(conn: RawKafka, correlation_id: int) -> int:
    """The next frame is the short error reply: [correlation id][int16 error], nothing after it."""
    frame = conn.recv_frame()
    assert frame is not None, "the broker closed the connection instead of answering"
    assert len(frame) == 6, f"expected [correlation id][error], got {frame!r}"
    got_id, error = struct.unpack(">ih", frame)
    assert got_id == correlation_id, (got_id, correlation_id)
    return error


def serves_on(conn: RawKafka) -> None:
    """The same connection still answers a following ApiVersions."""
    error, keys = conn.api_versions(0)
    assert error == wire.NONE and wire.API_PRODUCE in keys


def test_an_unsupported_version_of_another_api_gets_35_and_the_connection_stays(bootstrap: str, topic: str,
                                                                                unchanged: None) -> None:
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(request_header(wire.API_PRODUCE, 999, 7001) + b"\x00" * 16)
        assert error_reply(conn, 7001) == wire.UNSUPPORTED_VERSION
        serves_on(conn)


def test_an_unknown_api_key_gets_42_and_the_connection_stays(bootstrap: str, unchanged: None) -> None:
    """No schema at all for the key: INVALID_REQUEST, what Kafka's own parser raises for it."""
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(request_header(31_000, 0, 7002))
        assert error_reply(conn, 7002) == wire.INVALID_REQUEST
        serves_on(conn)


def test_a_truncated_body_gets_42_and_the_connection_stays(bootstrap: str, unchanged: None) -> None:
    """Produce v7 whose header is whole and whose body stops after 3 bytes."""
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(request_header(wire.API_PRODUCE, 7, 7003) + b"\xff\xff\xff")
        assert error_reply(conn, 7003) == wire.INVALID_REQUEST
        serves_on(conn)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00\x00"],
                         ids=["empty", "1-byte", "3-bytes", "7-bytes"])
def test_an_unreadable_header_closes_the_connection(bootstrap: str, payload: bytes, unchanged: None) -> None:
    """Fewer bytes than api key, version and correlation id: nothing to answer to."""
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(payload)
        assert conn.recv_frame() is None
    still_serves(bootstrap)


def test_a_frame_over_the_size_limit_closes_the_connection(bootstrap: str, unchanged: None) -> None:
    """A size of 2 GiB - 1 (over any request limit) is refused before its bytes arrive."""
    with RawKafka.to(bootstrap) as conn:
        conn.sock.sendall(struct.pack(">i", 2**31 - 1) + request_header(wire.API_API_VERSIONS, 0, 1))
        assert conn.closed_by_peer()
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
