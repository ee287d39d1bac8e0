"""Metadata, Produce, Fetch and ListOffsets answers over a plain socket, where the clients hide them
(KAFKA-FACTS; the issue's by-design points): Metadata auto-creates a topic as a 1-partition partitioned
topic only when allowed; Produce never creates; Fetch at the end is empty, past it OFFSET_OUT_OF_RANGE,
keeps no session (id 0), honours max_wait (long poll) and wakes when a record arrives, and returns a
whole first batch even over max_bytes (KIP-74); ListOffsets of an empty partition; acks=0 is never
answered and the next request still is, in order.
"""

from __future__ import annotations

import struct
import threading
import time

from tests.kafka import wire
from tests.kafka.helpers import create_partitioned, rest_partitions, unique_topic
from tests.kafka.wire import RawKafka, record_batch, request_header, string

LONG_POLL_MS = 1500


def test_metadata_auto_creates_one_partition_only_when_allowed(standalone, bootstrap: str) -> None:
    topic = unique_topic("md-auto")
    with RawKafka.to(bootstrap) as conn:
        assert conn.metadata_topics([topic], allow_auto_create=False) == {topic: (wire.UNKNOWN_TOPIC_OR_PARTITION, 0)}
        assert rest_partitions(standalone.admin_url, topic) == 0
        assert conn.metadata_topics([topic], allow_auto_create=True) == {topic: (wire.NONE, 1)}
        old = unique_topic("md-v1")            # v1 has no flag: the broker's auto-creation setting (on)
        assert conn.metadata_topics([old]) == {old: (wire.NONE, 1)}
    assert rest_partitions(standalone.admin_url, topic) == 1      # partitioned, with 1 partition
    assert rest_partitions(standalone.admin_url, old) == 1


def test_produce_does_not_create_topics_or_partitions(standalone, bootstrap: str) -> None:
    topic = unique_topic("produce-unknown")
    create_partitioned(standalone.admin_url, topic, 1)
    absent = unique_topic("never-created")
    with RawKafka.to(bootstrap) as conn:
        assert conn.produce(absent, 0, record_batch([(None, b"x")])).error == wire.UNKNOWN_TOPIC_OR_PARTITION
        assert conn.produce(topic, 5, record_batch([(None, b"x")])).error == wire.UNKNOWN_TOPIC_OR_PARTITION
        assert conn.list_offset(topic, 5, -1)[0] == wire.UNKNOWN_TOPIC_OR_PARTITION
        assert conn.fetch(topic, 5, 0).error == wire.UNKNOWN_TOPIC_OR_PARTITION
    assert rest_partitions(standalone.admin_url, absent) == 0


def test_list_offsets_of_an_empty_partition(standalone, bootstrap: str) -> None:
    topic = unique_topic("lo-empty")
    create_partitioned(standalone.admin_url, topic, 1)
    with RawKafka.to(bootstrap) as conn:
        assert conn.list_offset(topic, 0, -2) == (wire.NONE, 0)
        assert conn.list_offset(topic, 0, -1) == (wire.NONE, 0)
        assert conn.list_offset(topic, 0, 0) == (wire.NONE, -1)    # by time: no record at or after it


def test_fetch_positions_and_no_session(standalone, bootstrap: str) -> None:
    topic = unique_topic("fetch-pos")
    create_partitioned(standalone.admin_url, topic, 1)
    with RawKafka.to(bootstrap) as conn:
        assert conn.produce(topic, 0, record_batch([(None, b"a"), (None, b"b")])).error == wire.NONE
        whole = conn.fetch(topic, 0, 0)
        assert (whole.top_error, whole.error, whole.high_watermark, whole.log_start_offset) == (0, 0, 2, 0)
        assert whole.records, "nothing read from offset 0"
        at_end = conn.fetch(topic, 0, 2)
        assert (at_end.error, at_end.records) == (wire.NONE, b"")
        for past in (3, -5):
            assert conn.fetch(topic, 0, past).error == wire.OFFSET_OUT_OF_RANGE, past
        asked = conn.fetch(topic, 0, 0, session_id=0, session_epoch=0)     # a client asking for a session
        assert (asked.top_error, asked.session_id, asked.error) == (wire.NONE, 0, wire.NONE)


def test_fetch_returns_a_first_batch_bigger_than_max_bytes(standalone, bootstrap: str) -> None:
    """KIP-74: otherwise a consumer whose max_bytes is below a batch's size could never progress."""
    topic = unique_topic("fetch-big")
    create_partitioned(standalone.admin_url, topic, 1)
    with RawKafka.to(bootstrap) as conn:
        assert conn.produce(topic, 0, record_batch([(None, b"a" * 100)] * 3)).error == wire.NONE
        got = conn.fetch(topic, 0, 0, max_bytes=10)
        assert got.error == wire.NONE and len(got.records) > 300, got


def test_fetch_long_polls_and_wakes_on_a_new_record(standalone, bootstrap: str) -> None:
    topic = unique_topic("fetch-wait")
    create_partitioned(standalone.admin_url, topic, 1)
    with RawKafka.to(bootstrap) as conn, RawKafka.to(bootstrap) as producer:
        assert producer.produce(topic, 0, record_batch([(None, b"first")])).error == wire.NONE
        started = time.monotonic()
        empty = conn.fetch(topic, 0, 1, max_wait_ms=LONG_POLL_MS)
        waited = time.monotonic() - started
        assert empty.records == b"" and LONG_POLL_MS / 1000 - 0.1 <= waited <= LONG_POLL_MS / 1000 + 2, waited
        started = time.monotonic()
        short = conn.fetch(topic, 0, 0, max_wait_ms=LONG_POLL_MS, min_bytes=10**6)   # min_bytes never met
        assert short.records and time.monotonic() - started >= LONG_POLL_MS / 1000 - 0.1

        late = threading.Timer(0.5, lambda: producer.produce(topic, 0, record_batch([(None, b"late")])))
        late.start()
        try:
            started = time.monotonic()
            woken = conn.fetch(topic, 0, 1, max_wait_ms=10_000)
            waited = time.monotonic() - started
        finally:
            late.join()
        assert woken.error == wire.NONE and b"late" in woken.records and woken.high_watermark == 2
        assert waited < 5, f"the long poll was not woken by the new record ({waited:.1f} s)"


def test_acks_0_is_not_answered_and_the_next_request_is(standalone, bootstrap: str) -> None:
    topic = unique_topic("acks0")
    create_partitioned(standalone.admin_url, topic, 1)
    batch = record_batch([(None, b"fire and forget")])
    body = (string(None) + struct.pack(">hi", 0, 30_000) + struct.pack(">i", 1) + string(topic)
            + struct.pack(">ii", 1, 0) + struct.pack(">i", len(batch)) + batch)
    with RawKafka.to(bootstrap) as conn:
        conn.send_frame(request_header(wire.API_PRODUCE, 7, 500) + body)
        conn.send_frame(request_header(wire.API_API_VERSIONS, 0, 501))
        frame = conn.recv_frame()
        assert frame is not None and struct.unpack_from(">i", frame)[0] == 501, frame
        assert conn.list_offset(topic, 0, -1) == (wire.NONE, 1)     # stored before the next answer
