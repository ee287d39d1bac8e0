"""The idempotent producer's rules over a plain socket (KAFKA-FACTS §7; issue: "base sequence must be
last+1, gaps refused with OUT_OF_ORDER_SEQUENCE_NUMBER; the last 5 batches remembered so a retried
batch gets its original offsets back; INVALID_PRODUCER_EPOCH").

Raw requests (tests/kafka/wire.py): InitProducerId, then Produce of batches built by kafka-python's
record builder. What is stored is checked with the high watermark (ListOffsets latest) and by reading
the partition back with kafka-python.
"""

from __future__ import annotations

import pytest

from tests.kafka import wire
from tests.kafka.helpers import create_partitioned, unique_topic
from tests.kafka.test_kafka_python import KafkaPython
from tests.kafka.wire import RawKafka, record_batch


@pytest.fixture
def topic(standalone) -> str:
    name = unique_topic("idem-wire")
    create_partitioned(standalone.admin_url, name, 1)
    return name


def values(bootstrap: str, topic: str, expect: int) -> list[bytes | None]:
    return [r.value for r in KafkaPython(bootstrap).consume(topic, 0, ("earliest", 0), expect=expect)]


def end_offset(conn: RawKafka, topic: str) -> int:
    error, offset = conn.list_offset(topic, 0, -1)
    assert error == wire.NONE, error
    return offset


def test_a_retried_batch_gets_its_first_offsets_back_and_is_stored_once(bootstrap: str, topic: str) -> None:
    with RawKafka.to(bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        first = record_batch([(b"k0", b"a0"), (b"k1", b"a1"), (b"k2", b"a2")], producer_id=pid,
                             producer_epoch=epoch, base_sequence=0)
        one = conn.produce(topic, 0, first)
        assert one.error == wire.NONE, one
        again = conn.produce(topic, 0, first)           # the same bytes: a retry after a lost answer
        assert (again.error, again.base_offset) == (wire.NONE, one.base_offset), (one, again)
        second = record_batch([(b"k3", b"a3")], producer_id=pid, producer_epoch=epoch, base_sequence=3)
        two = conn.produce(topic, 0, second)
        assert two.error == wire.NONE and two.base_offset == one.base_offset + 3, (one, two)
        # an older one of the last 5 batches, retried after a newer one: still its own offsets
        old = conn.produce(topic, 0, first)
        assert (old.error, old.base_offset) == (wire.NONE, one.base_offset), (one, old)
        assert end_offset(conn, topic) == two.base_offset + 1
    assert values(bootstrap, topic, 4) == [b"a0", b"a1", b"a2", b"a3"]


def test_a_sequence_gap_is_refused_and_nothing_is_stored(bootstrap: str, topic: str) -> None:
    with RawKafka.to(bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        ok = conn.produce(topic, 0, record_batch([(None, b"s0"), (None, b"s1")], producer_id=pid,
                                                 producer_epoch=epoch, base_sequence=0))
        assert ok.error == wire.NONE, ok
        end = end_offset(conn, topic)
        gap = conn.produce(topic, 0, record_batch([(None, b"gap")], producer_id=pid, producer_epoch=epoch,
                                                  base_sequence=5))          # 2 expected
        assert gap.error == wire.OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        assert end_offset(conn, topic) == end, "a refused batch was stored"
        nxt = conn.produce(topic, 0, record_batch([(None, b"s2")], producer_id=pid, producer_epoch=epoch,
                                                  base_sequence=2))
        assert nxt.error == wire.NONE and nxt.base_offset == end, nxt
    assert values(bootstrap, topic, 3) == [b"s0", b"s1", b"s2"]


def test_a_stale_epoch_is_fenced(bootstrap: str, topic: str) -> None:
    """The producer id is bumped to a new epoch (a batch at epoch+1, sequence 0); epoch is then stale."""
    with RawKafka.to(bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        assert conn.produce(topic, 0, record_batch([(None, b"e0")], producer_id=pid, producer_epoch=epoch + 1,
                                                   base_sequence=0)).error == wire.NONE
        end = end_offset(conn, topic)
        stale = conn.produce(topic, 0, record_batch([(None, b"stale")], producer_id=pid, producer_epoch=epoch,
                                                    base_sequence=1))
        assert stale.error == wire.INVALID_PRODUCER_EPOCH, stale
        assert end_offset(conn, topic) == end, "a fenced batch was stored"
    assert values(bootstrap, topic, 1) == [b"e0"]


def test_a_new_producer_id_must_start_at_sequence_zero(bootstrap: str, topic: str) -> None:
    """A partition that never stored a producer's earlier batches refuses a later one: librdkafka takes
    a later batch's success as proof that earlier batches it had no answer for were stored (its
    "implicit ack"), so accepting it here lost those batches silently when the first one had failed
    on another owner. The refusal is OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka answers by
    bumping its epoch and sending again from sequence 0."""
    with RawKafka.to(bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        later = conn.produce(topic, 0, record_batch([(None, b"s13")], producer_id=pid, producer_epoch=epoch,
                                                    base_sequence=13))
        assert later.error == wire.OUT_OF_ORDER_SEQUENCE_NUMBER, later
        assert end_offset(conn, topic) == 0, "a batch whose predecessors are missing was stored"
        first = conn.produce(topic, 0, record_batch([(None, b"s0")], producer_id=pid, producer_epoch=epoch,
                                                    base_sequence=0))
        assert first.error == wire.NONE and first.base_offset == 0, first
        bumped = conn.produce(topic, 0, record_batch([(None, b"b0")], producer_id=pid, producer_epoch=epoch + 1,
                                                     base_sequence=0))
        assert bumped.error == wire.NONE and bumped.base_offset == 1, bumped
    assert values(bootstrap, topic, 2) == [b"s0", b"b0"]
