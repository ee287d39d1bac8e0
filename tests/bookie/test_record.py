"""The record codec: round trips, and a torn or corrupted tail is never taken for a record."""

from __future__ import annotations

import itertools

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.record import HEADER_BYTES, InvalidRecord, RecordKind, RecordScanner, decode_one, encode

MAX = 1 << 20

records_st = st.lists(
    st.tuples(st.sampled_from(list(RecordKind)), st.integers(0, 2**63 - 1),
              st.integers(0, 2**63 - 1), st.integers(-1, 2**62), st.binary(max_size=300)),
    min_size=1, max_size=20)


def _encode_all(records):
    return [encode(k, ledger, e, lac, p) for k, ledger, e, lac, p in records]


@settings(deadline=None)
@given(records_st, st.integers(1, 97))
def test_scanner_round_trips_any_chunking(records, chunk_bytes):
    blobs = _encode_all(records)
    data = b"".join(blobs)
    scanner = RecordScanner(payload_bytes_max=MAX)
    got = []
    for i in range(0, len(data), chunk_bytes):
        got += scanner.feed(data[i:i + chunk_bytes])
    assert not scanner.invalid and scanner.trailing_bytes == 0
    assert scanner.end_offset == len(data)
    assert [(r.kind, r.ledger_id, r.entry_id, r.lac, r.payload) for r in got] == records
    offsets = [0]
    for blob in blobs[:-1]:
        offsets.append(offsets[-1] + len(blob))
    assert [r.offset for r in got] == offsets
    assert all(r.payload_crc32c == google_crc32c.value(r.payload) for r in got)


@settings(deadline=None)
@given(records_st, st.data())
def test_torn_tail_yields_exactly_the_complete_prefix(records, data):
    blobs = _encode_all(records)
    whole = b"".join(blobs)
    cut = data.draw(st.integers(0, len(whole) - 1))
    scanner = RecordScanner(payload_bytes_max=MAX)
    got = scanner.feed(whole[:cut])
    complete, end = 0, 0
    for blob in blobs:
        if end + len(blob) > cut:
            break
        end += len(blob)
        complete += 1
    assert len(got) == complete
    assert scanner.end_offset == end


@settings(max_examples=200, deadline=None)
@given(records_st, st.data())
def test_any_flipped_byte_stops_the_scan_at_that_record(records, data):
    blobs = _encode_all(records)
    whole = bytearray(b"".join(blobs))
    pos = data.draw(st.integers(0, len(whole) - 1))
    whole[pos] ^= data.draw(st.integers(1, 255))
    scanner = RecordScanner(payload_bytes_max=MAX)
    got = scanner.feed(bytes(whole))
    ends = list(itertools.accumulate(len(blob) for blob in blobs))
    damaged = next(i for i, end in enumerate(ends) if pos < end)
    assert len(got) == damaged  # every record before the damaged one, none from it on
    assert scanner.end_offset == ends[damaged] - len(blobs[damaged])   # where the damaged one starts
    assert scanner.invalid or scanner.trailing_bytes > 0


def test_zero_filled_tail_is_invalid_not_a_record():
    scanner = RecordScanner(payload_bytes_max=MAX)
    blob = encode(RecordKind.ADD, 1, 2, 1, b"abc")
    assert len(scanner.feed(blob + bytes(HEADER_BYTES + 10))) == 1
    assert scanner.invalid and scanner.end_offset == len(blob)


def test_oversized_length_is_invalid_before_buffering_it():
    scanner = RecordScanner(payload_bytes_max=16)
    assert scanner.feed(encode(RecordKind.ADD, 1, 2, 1, b"x" * 17)) == []
    assert scanner.invalid


def test_decode_one_checks_exact_length_and_checksums():
    blob = encode(RecordKind.ADD, 7, 9, 8, b"payload")
    record = decode_one(blob, 100, payload_bytes_max=MAX)
    assert (record.ledger_id, record.entry_id, record.lac, record.payload, record.offset) == \
        (7, 9, 8, b"payload", 100)
    with pytest.raises(InvalidRecord):
        decode_one(blob[:-1], payload_bytes_max=MAX)
    damaged = bytearray(blob)
    damaged[-1] ^= 1
    with pytest.raises(InvalidRecord):
        decode_one(bytes(damaged), payload_bytes_max=MAX)
