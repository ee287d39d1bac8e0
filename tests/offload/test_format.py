"""offload.format: entries -> Parquet rows -> the same entries, byte for byte.

Entries are built with entries.batch / entries.entry exactly as producers make them; every test
reads the object back through the public API (read_entries / entries_from_table) and compares
bytes. Corruption must raise ColdObjectCorrupt, never return wrong bytes.
"""

from __future__ import annotations

import io
import random
import zlib
from pathlib import Path
from typing import Any

import pulsar
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import ColdObjectCorrupt, ColdObjectMissing, ColdTierUnavailable, InvariantViolation
from entries import batch as eb
from entries.entry import build_entry, parse_entry, verify_entry_checksum
from offload import format as fmt
from offload import rows as rows_module
from proto import pulsar_api_pb2 as pb

CODECS = [eb.NONE, eb.LZ4, eb.ZLIB, eb.ZSTD]
ORIGIN = fmt.LedgerOrigin("persistent://t/ns/topic", -1, 42)
PUBLISH_MS = 1_700_000_000_123


def batch_entry(messages: list[eb.BatchMessage], compression: int = eb.NONE, sequence_id: int = 0,
                producer: str = "prod-1", publish_ms: int = PUBLISH_MS) -> bytes:
    md, payload = eb.build_batch(messages, producer_name=producer, sequence_id=sequence_id,
                                 publish_time_ms=publish_ms, compression=compression)
    return build_entry(md, payload)


def single_entry(payload: bytes, compression: int = eb.NONE, sequence_id: int = 5, **fields: object) -> bytes:
    md = pb.MessageMetadata(producer_name="prod-1", sequence_id=sequence_id, publish_time=PUBLISH_MS,
                            **fields)  # type: ignore[arg-type]
    if compression != eb.NONE:
        md.compression = compression  # type: ignore[assignment]
        md.uncompressed_size = len(payload)
    return build_entry(md, eb.compress(payload, compression))


def varied_messages(rnd: random.Random, count: int) -> list[eb.BatchMessage]:
    out = []
    for i in range(count):
        null = i % 7 == 3
        out.append(eb.BatchMessage(
            payload=b"" if null else rnd.randbytes(rnd.randrange(0, 300)),
            properties={f"p{j}": f"v{rnd.randrange(100)}" for j in range(i % 3)},
            partition_key=f"key-{i}" if i % 2 else None,
            ordering_key=rnd.randbytes(4) if i % 4 == 1 else None,
            event_time_ms=1_600_000_000_000 + i if i % 5 == 0 else None,
            null_value=null))
    return out


def write(entries: list[bytes], row_group_bytes: int = 1 << 20,
          origin: fmt.LedgerOrigin = ORIGIN, first: int = 0) -> bytes:
    sink = io.BytesIO()
    writer = fmt.LedgerWriter(sink, origin, row_group_bytes)
    for i, data in enumerate(entries):
        writer.add(first + i, data)
    meta = writer.close()
    assert meta["strata.entries"] == str(len(entries))
    return sink.getvalue()


def assert_round_trip(entries: list[bytes]) -> bytes:
    blob = write(entries)
    assert fmt.read_entries(io.BytesIO(blob), 0, len(entries) - 1) == list(enumerate(entries))
    return blob


def rows(blob: bytes) -> list[dict]:
    return pq.read_table(io.BytesIO(blob)).to_pylist()


@pytest.mark.parametrize("compression", CODECS)
def test_batches_of_every_compression_rebuild_from_rows(compression: int, seed: int) -> None:
    rnd = random.Random(seed)
    batches = [varied_messages(rnd, n) for n in (1, 10, 37)]
    entries = [batch_entry(msgs, compression, sequence_id=100 * i) for i, msgs in enumerate(batches)]
    blob = assert_round_trip(entries)
    table = rows(blob)
    assert len(table) == sum(map(len, batches))
    for row in table:  # rebuilt from the rows alone: the stored block is not kept twice
        assert row["entry_payload"] is None
        assert row["entry_rebuild"] in (compression, None)
    members = [(i, j, m) for i, msgs in enumerate(batches) for j, m in enumerate(msgs)]
    for row, (entry_id, index, msg) in zip(table, members, strict=True):
        assert (row["entry_id"], row["batch_index"], row["batch_size"]) == (entry_id, index, len(batches[entry_id]))
        assert row["payload"] == (None if msg.null_value else msg.payload)
        assert row["key"] == msg.partition_key
        assert row["ordering_key"] == msg.ordering_key
        assert dict(row["properties"]) == msg.properties
        assert row["sequence_id"] == 100 * entry_id + index
        assert row["producer_name"] == "prod-1" and row["topic"] == ORIGIN.topic
        assert row["publish_time"].timestamp() * 1000 == pytest.approx(PUBLISH_MS)
        event = row["event_time"]
        assert (event and round(event.timestamp() * 1000)) == msg.event_time_ms
        assert (row["entry_metadata"] is not None) == (index == 0)
        assert row["message_metadata"] is not None


@pytest.mark.parametrize("compression", CODECS)
def test_non_batched_entries_rebuild_from_rows(compression: int, seed: int) -> None:
    rnd = random.Random(seed)
    prop = pb.KeyValue(key="k", value="v")
    entries = [
        single_entry(rnd.randbytes(2000), compression),
        single_entry(b"", compression),
        single_entry(b"", compression, null_value=True, partition_key="gone"),
        single_entry(rnd.randbytes(10), compression, partition_key="pk", ordering_key=b"ok",
                     event_time=12345, properties=[prop], partition_key_b64_encoded=True),
        single_entry(b"x" * 5000, compression, sequence_id=2**64 - 1),
    ]
    blob = assert_round_trip(entries)
    table = rows(blob)
    assert [r["batch_index"] for r in table] == [-1] * 5
    assert [r["batch_size"] for r in table] == [0] * 5
    assert table[1]["payload"] == b"" and table[2]["payload"] is None
    assert table[3]["key"] == "pk" and table[3]["ordering_key"] == b"ok"
    assert dict(table[3]["properties"]) == {"k": "v"}
    assert table[4]["sequence_id"] == -1  # Java's signed view of the uint64
    assert all(r["entry_payload"] is None for r in table)


def test_chunked_marker_and_encrypted_entries_are_kept_as_stored_blocks(seed: int) -> None:
    rnd = random.Random(seed)
    chunk_payloads = [rnd.randbytes(1000), rnd.randbytes(333)]
    entries = [
        single_entry(chunk_payloads[0], uuid="prod-1-5", chunk_id=0, num_chunks_from_msg=2,
                     total_chunk_msg_size=1333),
        single_entry(chunk_payloads[1], uuid="prod-1-5", chunk_id=1, num_chunks_from_msg=2,
                     total_chunk_msg_size=1333),
        single_entry(b"\x08\x01", marker_type=10),
        single_entry(rnd.randbytes(64), encryption_keys=[pb.EncryptionKeys(key="k", value=b"v")],
                     encryption_param=b"iv"),
        single_entry(rnd.randbytes(64), compression=eb.ZSTD, encryption_algo="x"),
    ]
    blob = assert_round_trip(entries)
    for row, data in zip(rows(blob), entries, strict=True):
        assert row["entry_rebuild"] == fmt.BLOCK
        assert row["payload"] is None and data.endswith(row["entry_payload"])
    # compressed bytes that do not decode (garbage under snappy): also a stored block
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, compression=eb.SNAPPY,
                            uncompressed_size=3)
    assert_round_trip([build_entry(md, b"not snappy")])


def test_recompression_that_differs_keeps_the_stored_block(seed: int) -> None:
    """A producer whose zlib level differs from ours: rows still unpacked, block kept too."""
    rnd = random.Random(seed)
    messages = [eb.BatchMessage(b"text %d " % i * 40) for i in range(20)]
    md, raw = eb.build_batch(messages, producer_name="p", sequence_id=0, publish_time_ms=1)
    md.compression = eb.ZLIB
    md.uncompressed_size = len(raw)
    block = zlib.compress(raw, 1)
    assert block != eb.compress(raw, eb.ZLIB)
    entries = [build_entry(md, block), batch_entry(varied_messages(rnd, 5), eb.ZLIB)]
    table = rows(assert_round_trip(entries))
    assert table[0]["entry_rebuild"] == fmt.BLOCK and table[0]["entry_payload"] == block
    assert [r["payload"] for r in table[:20]] == [m.payload for m in messages]
    assert table[20]["entry_rebuild"] == eb.ZLIB and table[20]["entry_payload"] is None


def test_entries_that_do_not_parse_or_fail_their_crc_are_kept_verbatim(seed: int) -> None:
    rnd = random.Random(seed)
    good = batch_entry(varied_messages(rnd, 4))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    batch_trailing = build_entry(*_batch_with_trailing_bytes())
    empty_batch = build_entry(pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1,
                                                 num_messages_in_batch=0), b"")
    entries = [b"not an entry", bytes(bad_crc), good, empty_batch, batch_trailing]
    table = rows(assert_round_trip(entries))
    assert table[0]["entry_rebuild"] == fmt.RAW and table[0]["entry_payload"] == b"not an entry"
    assert table[0]["producer_name"] is None and table[0]["sequence_id"] is None
    assert table[1]["entry_rebuild"] == fmt.RAW
    assert table[-2]["entry_rebuild"] == fmt.BLOCK and table[-2]["entry_id"] == 3  # one row all the same
    assert table[-1]["entry_rebuild"] == fmt.BLOCK  # trailing bytes: rows cannot rebuild it


def _batch_with_trailing_bytes() -> tuple[pb.MessageMetadata, bytes]:
    md, payload = eb.build_batch([eb.BatchMessage(b"a"), eb.BatchMessage(b"b")], producer_name="p",
                                 sequence_id=0, publish_time_ms=1)
    return md, payload + b"junk"


def test_message_id_is_what_the_official_client_deserializes(seed: int) -> None:
    rnd = random.Random(seed)
    origin = fmt.LedgerOrigin("persistent://t/ns/x-partition-3", 3, 2**40 + 7)
    entries = [single_entry(b"one"), batch_entry(varied_messages(rnd, 300)), single_entry(b"two")]
    table = rows(write(entries, origin=origin, first=1000))
    for row in table:
        msg_id = pulsar.MessageId.deserialize(row["message_id"])
        assert (msg_id.ledger_id(), msg_id.entry_id(), msg_id.batch_index(), msg_id.partition()) == \
            (origin.ledger_id, row["entry_id"], row["batch_index"], 3)
        assert msg_id.serialize() == row["message_id"]  # what the client itself writes for that id
        if row["batch_index"] < 0:
            assert row["message_id"] == pulsar.MessageId(3, origin.ledger_id, row["entry_id"], -1).serialize()
    plain = rows(write([single_entry(b"x")]))[0]["message_id"]
    assert plain == pulsar.MessageId(-1, ORIGIN.ledger_id, 0, -1).serialize()


@st.composite
def ledgers(draw: st.DrawFn) -> list[bytes]:
    entries = []
    for i in range(draw(st.integers(1, 12))):
        compression = draw(st.sampled_from(CODECS))
        kind = draw(st.sampled_from(["batch", "batch", "single", "single", "chunk", "raw"]))
        if kind == "chunk":
            entries.append(single_entry(draw(st.binary(max_size=100)), uuid="u", chunk_id=0, num_chunks_from_msg=1))
        elif kind == "raw":
            entries.append(draw(st.binary(max_size=50)))
        elif kind == "batch":
            messages = [eb.BatchMessage(
                payload=draw(st.binary(max_size=200)),
                properties=draw(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)),
                partition_key=draw(st.none() | st.text(max_size=8)),
                ordering_key=draw(st.none() | st.binary(max_size=8)),
                event_time_ms=draw(st.none() | st.integers(0, 2**64 - 1)),
                sequence_id=draw(st.none() | st.integers(0, 2**64 - 1)))
                for _ in range(draw(st.integers(1, 20)))]
            entries.append(batch_entry(messages, compression, sequence_id=i,
                                       publish_ms=draw(st.integers(0, 2**64 - 1))))
        else:
            entries.append(single_entry(draw(st.binary(max_size=3000)), compression,
                                        sequence_id=draw(st.integers(0, 2**64 - 1))))
    return entries


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=ledgers(), row_group_bytes=st.integers(1, 5000), data=st.data())
def test_any_ledger_and_any_range_round_trips(entries: list[bytes], row_group_bytes: int,
                                              data: st.DataObject) -> None:
    blob = write(entries, row_group_bytes=row_group_bytes)
    first = data.draw(st.integers(0, len(entries) - 1))
    last = data.draw(st.integers(first, len(entries) - 1))
    assert fmt.read_entries(io.BytesIO(blob), first, last) == [(i, entries[i]) for i in range(first, last + 1)]


def test_row_groups_never_split_an_entry_and_ranges_are_right(seed: int) -> None:
    rnd = random.Random(seed)
    entries = [batch_entry(varied_messages(rnd, rnd.randrange(1, 30)), rnd.choice(CODECS)) for _ in range(40)]
    blob = write(entries, row_group_bytes=2000, first=7)
    parquet = pq.ParquetFile(io.BytesIO(blob))
    ranges = fmt.row_group_entry_ranges(parquet.metadata)
    assert parquet.metadata.num_row_groups == len(ranges) > 3
    assert ranges[0][0] == 7 and ranges[-1][1] == 46
    for i, (low, high) in enumerate(ranges):
        ids = parquet.read_row_group(i, columns=["entry_id"]).column(0).to_pylist()
        assert (min(ids), max(ids)) == (low, high) and sorted(ids) == ids
        if i:
            assert low == ranges[i - 1][1] + 1  # contiguous, no entry in two groups
    spans = fmt.row_group_byte_spans(parquet.metadata)
    for i, (start, end) in enumerate(spans):  # the bytes of all the group's column chunks
        group = parquet.metadata.row_group(i)
        chunks = [group.column(j) for j in range(group.num_columns)]
        assert start == min(c.dictionary_page_offset or c.data_page_offset for c in chunks)
        assert end == max(c.data_page_offset + c.total_compressed_size for c in chunks)
    assert spans[0][0] == 4 and all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
    summary = fmt.object_summary(parquet.metadata)
    assert (summary["first_entry_id"], summary["last_entry_id"], summary["entries"]) == (7, 46, 40)
    assert summary["messages"] == parquet.metadata.num_rows
    assert summary["min_publish_time_ms"] == summary["max_publish_time_ms"] == PUBLISH_MS
    for first, last in ((7, 7), (20, 33), (46, 46), (7, 46)):
        got = fmt.read_entries(io.BytesIO(blob), first, last)
        assert got == [(i, entries[i - 7]) for i in range(first, last + 1)]
    table = parquet.read_row_groups([1, 2])
    low, high = ranges[1][0], ranges[2][1]
    assert fmt.entries_from_table(table, low, high) == [(i, entries[i - 7]) for i in range(low, high + 1)]
    with pytest.raises(ColdObjectCorrupt):  # an entry outside the table is missing, not skipped
        fmt.entries_from_table(table, low, high + 1)


def test_writer_to_a_path_and_entries_in_order_only(tmp_path: Path) -> None:
    path = tmp_path / "ledger.parquet"
    writer = fmt.LedgerWriter(str(path), ORIGIN, 1000)
    writer.add(0, single_entry(b"a"))
    with pytest.raises(InvariantViolation):
        writer.add(2, single_entry(b"c"))
    writer.add(1, single_entry(b"b"))
    writer.close()
    assert fmt.read_entries(str(path), 1, 1) == [(1, single_entry(b"b"))]
    with pytest.raises(ColdObjectMissing):
        fmt.read_entries(str(tmp_path / "gone.parquet"), 0, 0)


def test_a_directory_of_objects_reads_as_one_dataset(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    expected = set()
    for ledger_id, partition in ((1, 0), (2, 0), (3, 1)):
        origin = fmt.LedgerOrigin(f"persistent://t/ns/x-partition-{partition}", partition, ledger_id)
        batches = [varied_messages(rnd, rnd.randrange(1, 20)) for _ in range(5)]
        entries = [batch_entry(msgs, rnd.choice(CODECS)) for msgs in batches]
        (tmp_path / f"ledger-{ledger_id:020d}.parquet").write_bytes(write(entries, 700, origin))
        expected |= {(ledger_id, partition, e, i, None if m.null_value else m.payload)
                     for e, msgs in enumerate(batches) for i, m in enumerate(msgs)}
    dataset = ds.dataset(tmp_path, format="parquet")
    table = dataset.to_table(columns=["ledger_id", "partition", "entry_id", "batch_index", "payload"])
    got = list(zip(*(table.column(i).to_pylist() for i in range(5)), strict=True))
    assert len(got) == len(expected) and set(got) == expected
    only = dataset.to_table(filter=ds.field("ledger_id") == 2, columns=["ledger_id"])
    assert set(only.column(0).to_pylist()) == {2}


def test_truncated_object_is_corrupt(seed: int) -> None:
    blob = write([batch_entry(varied_messages(random.Random(seed), 20))])
    for size in (len(blob) - 1, len(blob) // 2, 10, 0):
        with pytest.raises(ColdObjectCorrupt):
            fmt.read_entries(io.BytesIO(blob[:size]), 0, 0)


def test_a_flipped_byte_in_a_payload_page_is_corrupt(seed: int) -> None:
    rnd = random.Random(seed)
    payload = rnd.randbytes(4000)  # random: stored as is, so findable in the file
    blob = write([single_entry(payload)])
    at = blob.find(payload[1000:1064])
    assert at > 0
    flipped = bytearray(blob)
    flipped[at + 10] ^= 0x01
    with pytest.raises(ColdObjectCorrupt):
        fmt.read_entries(io.BytesIO(bytes(flipped)), 0, 0)


def test_a_table_whose_bytes_changed_fails_the_crc(seed: int) -> None:
    """Even past Parquet's checks (e.g. a bug), a rebuilt entry never differs silently."""
    entries = [batch_entry(varied_messages(random.Random(seed), 10))]
    table = pq.read_table(io.BytesIO(write(entries)))
    payloads = table.column("payload").to_pylist()
    payloads[1] = (payloads[1] or b"") + b"!"
    changed = table.set_column(table.schema.get_field_index("payload"), "payload", pa.array(payloads, pa.binary()))
    with pytest.raises(ColdObjectCorrupt):
        fmt.entries_from_table(changed, 0, 0)
    with pytest.raises(ColdObjectCorrupt):
        fmt.entries_from_table(table.drop_columns(["entry_crc32c"]), 0, 0)


def test_a_row_group_map_that_does_not_tile_the_object_is_corrupt() -> None:
    blob = write([single_entry(b"a" * 100) for _ in range(6)], row_group_bytes=200)
    table = pq.read_table(io.BytesIO(blob))
    good = {k.decode(): v.decode() for k, v in pq.ParquetFile(io.BytesIO(blob)).metadata.metadata.items()
            if k.startswith(b"strata.")}
    groups = good["strata.row_groups"].split(",")
    assert len(groups) == 3
    for bad in (",".join(groups[:2]), ",".join([groups[1], groups[0], groups[2]]), "2:4:9,x,1:1:2", ""):
        sink = io.BytesIO()
        with pq.ParquetWriter(sink, table.schema) as writer:
            writer.write_table(table, row_group_size=2)
            writer.add_key_value_metadata({**good, "strata.row_groups": bad})
        with pytest.raises(ColdObjectCorrupt):
            fmt.row_group_entry_ranges(pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata)


def test_missing_or_mismatched_metadata_is_corrupt() -> None:
    blob = write([single_entry(b"a"), single_entry(b"b")])
    table = pq.read_table(io.BytesIO(blob))
    bare = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(None), bare)
    with pytest.raises(ColdObjectCorrupt):
        fmt.read_entries(io.BytesIO(bare.getvalue()), 0, 1)
    good = {k.decode(): v.decode() for k, v in pq.ParquetFile(io.BytesIO(blob)).metadata.metadata.items()
            if k.startswith(b"strata.")}
    for name, value in (("strata.format_version", "2"), ("strata.entries", "3"),
                        ("strata.messages", "1"), ("strata.ledger_id", "x")):
        sink = io.BytesIO()
        with pq.ParquetWriter(sink, table.schema) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata({**good, name: value})
        with pytest.raises(ColdObjectCorrupt):
            fmt.object_summary(pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata)
        with pytest.raises(ColdObjectCorrupt):
            fmt.read_entries(io.BytesIO(sink.getvalue()), 0, 1)


def test_an_empty_ledger_writes_a_valid_empty_object() -> None:
    sink = io.BytesIO()
    meta = fmt.LedgerWriter(sink, ORIGIN, 1000).close()
    assert meta["strata.entries"] == "0" and meta["strata.messages"] == "0"
    summary = fmt.object_summary(pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata)
    assert summary["entries"] == 0 and summary["last_entry_id"] == -1


def test_tables_from_other_readers_rebuild_or_are_refused(seed: int) -> None:
    """A reader that hands large_binary columns still rebuilds; wrong types are corrupt."""
    entries = [batch_entry(varied_messages(random.Random(seed), 12), eb.LZ4), single_entry(b"solo")]
    table = pq.read_table(io.BytesIO(write(entries)))
    large = table.cast(pa.schema([pa.field(f.name, pa.large_binary()) if f.type == pa.binary() else f
                                  for f in table.schema]))
    assert fmt.entries_from_table(large, 0, 1) == list(enumerate(entries))
    wrong = table.set_column(table.schema.get_field_index("entry_crc32c"), "entry_crc32c",
                             pa.array(["x"] * table.num_rows))
    with pytest.raises(ColdObjectCorrupt):
        fmt.entries_from_table(wrong, 0, 1)


def test_schema_suits_iceberg_and_spark() -> None:
    """No ns timestamps (Iceberg refuses them), every column optional (Iceberg refuses optional
    file columns in required table columns), times in UTC microseconds."""
    for field in fmt.MESSAGE_SCHEMA:
        assert field.nullable, field.name
    assert fmt.MESSAGE_SCHEMA.field("publish_time").type == pa.timestamp("us", tz="UTC")
    assert fmt.MESSAGE_SCHEMA.field("event_time").type == pa.timestamp("us", tz="UTC")
    blob = write([single_entry(b"x")])
    footer = pq.ParquetFile(io.BytesIO(blob)).metadata
    stats = footer.row_group(0).column(0).statistics  # topic: min == max lets Iceberg partition by it
    assert stats.has_min_max and stats.min == stats.max == ORIGIN.topic


def test_any_flipped_byte_gives_the_entries_or_corrupt_never_wrong_bytes(seed: int) -> None:
    rnd = random.Random(seed)
    entries = [batch_entry(varied_messages(rnd, 8), rnd.choice(CODECS)) for _ in range(6)]
    entries += [single_entry(rnd.randbytes(300)), single_entry(b"c", uuid="u", num_chunks_from_msg=1, chunk_id=0)]
    blob = write(entries, row_group_bytes=1500)
    expected = list(enumerate(entries))
    outcomes = {"intact": 0, "corrupt": 0}
    for at in rnd.sample(range(len(blob)), 300):
        flipped = bytearray(blob)
        flipped[at] ^= 1 << rnd.randrange(8)
        try:
            got = fmt.read_entries(bytes(flipped), 0, len(entries) - 1)
        except ColdObjectCorrupt:
            outcomes["corrupt"] += 1
            continue
        assert got == expected, f"wrong bytes after flipping byte {at}"
        outcomes["intact"] += 1  # e.g. a byte of a column the rebuild does not read
    assert outcomes["corrupt"] > 0


class _FailingFile(io.BytesIO):
    """A source whose reads fail the way an S3-backed file does when the tier is down."""

    def __init__(self, data: bytes, fail_after_reads: int) -> None:
        super().__init__(data)
        self.reads_left = fail_after_reads

    def _count(self) -> None:
        if self.reads_left <= 0:
            raise ColdTierUnavailable("tier down")
        self.reads_left -= 1

    def read(self, size: int | None = -1) -> bytes:
        self._count()
        return super().read(size)

    def readinto(self, buffer: Any) -> int:
        self._count()
        return super().readinto(buffer)


def test_a_source_that_fails_passes_its_error_through(seed: int) -> None:
    """Unavailable is retriable; it must not turn into a (final) ColdObjectCorrupt."""
    blob = write([batch_entry(varied_messages(random.Random(seed), 10))])
    reads = 0
    while True:  # fail the 1st read, then the 2nd, ... until a read of the whole object succeeds
        try:
            got = fmt.read_entries(_FailingFile(blob, reads), 0, 0)
        except ColdTierUnavailable:
            reads += 1
            continue
        assert got[0][0] == 0 and reads >= 2  # footer and data came in separate reads
        break


@pytest.mark.parametrize("compression", CODECS)
def test_recompression_is_entries_batch_compress(compression: int, seed: int) -> None:
    rnd = random.Random(seed)
    for size in (0, 1, 1024, 100_000):
        raw = rnd.randbytes(size // 2) + b"abc" * (size // 6)
        assert rows_module.compress(raw, compression) == eb.compress(raw, compression)


def test_zstd_blocks_that_lie_about_their_size_are_kept_as_stored(seed: int) -> None:
    rnd = random.Random(seed)
    raw = rnd.randbytes(500)
    entries = []
    for claimed in (499, 501, 10**9):  # frame says 500; metadata claims otherwise
        md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, compression=eb.ZSTD,
                                uncompressed_size=claimed)
        entries.append(build_entry(md, eb.compress(raw, eb.ZSTD)))
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, compression=eb.ZSTD,
                            uncompressed_size=500)
    entries.append(build_entry(md, b"not zstd at all"))
    table = rows(assert_round_trip(entries))
    assert [r["entry_rebuild"] for r in table] == [fmt.BLOCK] * 4


@pytest.mark.parametrize("compression", [eb.LZ4, eb.ZLIB, eb.ZSTD])
def test_a_codec_that_compresses_differently_later_delivers_the_messages_uncompressed(
        compression: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library upgrade that changes a codec's output (simulated: the reader's compress gives
    other bytes) must not lose offloaded messages: the entry comes back uncompressed, with the
    same messages, and passes its own CRC."""
    rnd = random.Random(seed)
    messages = varied_messages(rnd, 20)
    stored = [batch_entry(messages, compression, sequence_id=i * 20) for i in range(3)]
    blob = write(stored)
    before = fmt.codec_fallbacks
    monkeypatch.setattr(fmt, "compress", lambda data, codec: b"\x00" + eb.compress(data, codec))
    got = fmt.read_entries(io.BytesIO(blob), 0, len(stored) - 1)
    assert fmt.codec_fallbacks == before + len(stored)
    for (entry_id, data), original in zip(got, stored, strict=True):
        assert verify_entry_checksum(data)
        info = parse_entry(data)
        assert not info.metadata.HasField("compression")
        assert not info.metadata.HasField("uncompressed_size")
        old = parse_entry(original)
        assert info.metadata.sequence_id == old.metadata.sequence_id
        assert info.metadata.num_messages_in_batch == old.metadata.num_messages_in_batch
        assert eb.decode_payload(info.metadata, info.payload(data)) == \
            eb.decode_payload(old.metadata, old.payload(original)), entry_id


def test_a_damaged_row_still_fails_although_recompression_could_fall_back(seed: int) -> None:
    """The uncompressed fallback is only for rows that passed their page checksums: a flipped
    payload byte inside a compressed entry's rows is ColdObjectCorrupt, never delivered."""
    rnd = random.Random(seed)
    payload = bytes(rnd.randrange(256) for _ in range(50_000))
    stored = [batch_entry([eb.BatchMessage(payload=payload)], eb.ZSTD)]
    blob = bytearray(write(stored))
    at = bytes(blob).find(payload[1000:1032])
    assert at > 0
    blob[at + 5] ^= 0x40
    with pytest.raises(ColdObjectCorrupt):
        fmt.read_entries(io.BytesIO(bytes(blob)), 0, 0)


def test_offset_column_is_the_entry_offset_plus_the_batch_index(seed: int) -> None:
    """The `offset` column: the ledger's first offset + the messages of the entries before +
    the batch index (0 for a non-batched entry). Batches of random sizes, single messages, an
    opaque batch (one row for its 3 messages) and a raw entry (bad CRC: one row, 1 message); the
    recorded counts, when the writer is given them, win over the bytes. Seeded."""
    rnd = random.Random(seed)
    entries: list[bytes] = []
    counts: list[int] = []
    for i in range(20):
        n = rnd.choice([0, 1, 2, 5, 17])
        if n == 0:
            entries.append(single_entry(rnd.randbytes(20), sequence_id=i))
            counts.append(1)
        else:
            entries.append(batch_entry(varied_messages(rnd, n), rnd.choice(CODECS), sequence_id=100 * i))
            counts.append(n)
    entries.append(single_entry(b"secret", encryption_algo="x", num_messages_in_batch=3))
    counts.append(3)
    raw = bytearray(single_entry(b"damaged"))
    raw[-1] ^= 0xFF
    entries.append(bytes(raw))
    counts.append(1)
    first_offset = rnd.randrange(0, 10**12)
    origin = fmt.LedgerOrigin("persistent://t/ns/topic", -1, 42, first_offset)
    expected = []
    offset = first_offset
    for n, data in zip(counts, entries, strict=True):
        rows_of_entry = 1 if n == 3 or data is entries[-1] or not parse_entry(data).metadata.HasField(
            "num_messages_in_batch") else n
        expected.extend(offset + k for k in range(rows_of_entry))
        offset += n
    blob = write(entries, row_group_bytes=4096, origin=origin)
    table = pq.read_table(io.BytesIO(blob))
    assert table.column("offset").to_pylist() == expected
    assert fmt.read_entries(io.BytesIO(blob), 0, len(entries) - 1) == list(enumerate(entries))  # rebuild unchanged

    # the recorded counts win: one entry counted as 10 shifts every later offset by 9 more
    recorded = list(counts)
    recorded[0] += 9
    sink = io.BytesIO()
    writer = fmt.LedgerWriter(sink, origin, 4096)
    for i, (data, n) in enumerate(zip(entries, recorded, strict=True)):
        writer.add(i, data, n)
    writer.close()
    shifted = pq.read_table(io.BytesIO(sink.getvalue())).column("offset").to_pylist()
    first_rows = 1 if counts[0] == 1 else counts[0]
    assert shifted == expected[:first_rows] + [o + 9 for o in expected[first_rows:]]

    # no first offset known: null offsets, everything else as before
    unknown = pq.read_table(io.BytesIO(write(entries, origin=ORIGIN)))
    assert unknown.column("offset").null_count == len(expected)


def test_an_object_without_the_offset_column_still_reads(seed: int) -> None:
    """Objects written before the `offset` column existed: the broker's cold reads rebuild their
    entries (they read only REBUILD_COLUMNS)."""
    rnd = random.Random(seed)
    entries = [batch_entry(varied_messages(rnd, 4), eb.LZ4, sequence_id=i) for i in range(5)]
    table = pq.read_table(io.BytesIO(write(entries)))
    old = table.drop_columns(["offset"])
    sink = io.BytesIO()
    pq.write_table(old, sink)
    assert fmt.entries_from_table(pq.read_table(io.BytesIO(sink.getvalue())), 0, 4) == list(enumerate(entries))
