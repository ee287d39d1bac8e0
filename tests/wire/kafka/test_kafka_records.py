"""wire.kafka.records against the clients' own record batch builders and readers, every codec."""

import struct

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from wire.kafka import records as R
from wire.kafka.errors import (
    CorruptRecord,
    ErrorCode,
    InvalidRecord,
    UnsupportedCompression,
    UnsupportedMessageFormat,
)

CODECS = [0, 1, 2, 3, 4]


def _fill(builder):
    for i in range(20):
        builder.append(i, timestamp=1000 + i, key=None if i % 3 == 0 else b"key%d" % i,
                       value=None if i == 4 else b"value-%d " % i * 50, headers=[("h", b"x"), ("n", None)])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
def test_client_batches_decode(codec, builder):
    data = _fill(builder(magic=2, compression_type=codec, is_transactional=0, producer_id=7, producer_epoch=2,
                         base_sequence=11, batch_size=1 << 20))
    [batch] = R.decode_batches(data)
    assert (batch.compression, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (codec, 7, 2, 11)
    assert batch.records_count == 20 and batch.last_offset_delta == 19 and batch.max_timestamp == 1019
    assert batch.records[0].key is None and batch.records[4].value is None
    assert batch.records[5].value == b"value-5 " * 50 and batch.records[5].timestamp_delta == 5
    assert batch.records[1].headers == [("h", b"x"), ("n", None)]
    head = R.peek_batch_header(data)
    assert (head.producer_id, head.records_count, head.size) == (7, 20, len(data))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader", [KpBatch, AioBatch], ids=["kafka-python", "aiokafka"])
def test_our_batches_read_by_clients(codec, reader):
    recs = [R.Record(i, i * 2, None if i == 0 else b"k", b"v" * i * 100, [("a", None)]) for i in range(5)]
    data = R.encode_batch(recs, base_offset=100, base_timestamp=5000, max_timestamp=5008, producer_id=3,
                          producer_epoch=1, base_sequence=9, compression=codec)
    batch = reader(data)
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got[0] == (100, 5000, None, b"", [("a", None)])
    assert got[4] == (104, 5008, b"k", b"v" * 400, [("a", None)])
    assert R.decode_batches(data)[0].records == recs


def test_snappy_raw_and_xerial_both_decode():
    recs = [R.Record(0, 0, b"k", b"raw snappy " * 30, [])]
    xerial = R.encode_batch(recs, base_offset=0, base_timestamp=0, max_timestamp=0, compression=2)
    body = b"".join(R._encode_record(r) for r in recs)
    raw = _rebuild(xerial, bytes(cramjam.snappy.compress_raw(body)))  # librdkafka's raw snappy
    assert xerial[61:69] == R.XERIAL_MAGIC
    assert R.decode_batches(raw)[0].records == R.decode_batches(xerial)[0].records == recs


def _rebuild(batch, new_body):
    """The same header with another records block, batch length and CRC fixed up."""
    head = bytearray(batch[:61])
    head[8:12] = struct.pack(">i", 49 + len(new_body))
    after = bytes(head[21:]) + new_body
    head[17:21] = struct.pack(">I", crc32c(after))
    return bytes(head) + new_body


def _batch(**kw):
    return R.encode_batch([R.Record(0, 0, b"k", b"v", [])], base_offset=0, base_timestamp=0, max_timestamp=0, **kw)


def test_bad_crc_magic_and_codec():
    data = bytearray(_batch())
    data[-2] ^= 0xFF  # inside the value
    with pytest.raises(CorruptRecord) as err:
        R.decode_batches(bytes(data))
    assert err.value.kafka_code == ErrorCode.CORRUPT_MESSAGE
    assert R.decode_batches(bytes(data), verify_crc=False)  # parses (value changed)
    old = bytearray(_batch())
    old[16] = 1
    with pytest.raises(UnsupportedMessageFormat) as err2:
        R.decode_batches(bytes(old))
    assert err2.value.kafka_code == 43
    bad = _rebuild(_batch(), b"")
    bad = bytearray(bad)
    bad[22] |= 6  # attributes low byte: codec 6 + 0
    bad[17:21] = struct.pack(">I", crc32c(bytes(bad[21:])))
    with pytest.raises(UnsupportedCompression) as err3:
        R.decode_batches(bytes(bad))
    assert err3.value.kafka_code == 76


def test_partial_trailing_batch_ignored_unless_strict():
    one = _batch()
    data = one + one[:30]
    assert len(R.decode_batches(data)) == 1
    with pytest.raises(CorruptRecord):
        R.decode_batches(data, strict=True)


def test_records_count_mismatch_and_limits():
    data = bytearray(_batch())
    data[57:61] = struct.pack(">i", 2)
    data[17:21] = struct.pack(">I", crc32c(bytes(data[21:])))
    with pytest.raises(InvalidRecord) as err:
        R.decode_batches(bytes(data))
    assert err.value.kafka_code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidRecord):
        R.decode_batches(_batch(), max_records=0)


def test_zip_bomb_is_bounded():
    recs = [R.Record(0, 0, None, bytes(2_000_000), [])]
    data = R.encode_batch(recs, base_offset=0, base_timestamp=0, max_timestamp=0, compression=4)
    assert len(data) < 10_000
    with pytest.raises(CorruptRecord):
        R.decode_batches(data, decompressed_bytes_max=1_000_000)
    assert R.decode_batches(data)[0].records[0].value == bytes(2_000_000)


def test_zigzag_varints():
    for n in (0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)):
        assert R.read_varint(R.varint(n), 0) == (n, len(R.varint(n)))
    assert R.varint(-1) == b"\x01" and R.varint(1) == b"\x02"
