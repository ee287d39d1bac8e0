"""Stored entries -> one Arrow table of message rows: the schema of an offloaded ledger's rows,
and the builder both the offloader (`offload.format.LedgerWriter`, one table per row group) and
the Spark source's hot-ledger reads (`analytics`, the same rows straight from the bookies) use.

    rows = EntryTableBuilder(LedgerOrigin("persistent://t/ns/x", -1, ledger_id=7, first_offset=120))
    for entry_id, data in entries:
        rows.add(entry_id, data)
    table = rows.take()            # MESSAGE_SCHEMA; None if nothing was added since the last take

`MESSAGE_COLUMNS` are what a consumer would see (offload.format's docstring says what each
means); `REBUILD_COLUMNS` are what the broker needs to rebuild the stored entries.

Kafka offsets (`offset` column): an entry's offset is the ledger's first offset (its record's,
`ledger.ml_metadata`) plus the messages of the entries before it; a row's is its entry's plus
its batch index (0 for a non-batched entry). An entry's message count is the one its writer
recorded when given (`add(..., messages=n)`: the offloader passes the ledger's index), else
the broker's rule from the bytes: `num_messages_in_batch` (at least 1) for a batch, else 1. With
the first offset unknown (-1) the column is null. Objects written before the column existed
lack it; readers of message columns must tolerate that (the broker's cold reads use only
REBUILD_COLUMNS).

What must hold: entries come in order (first, first+1, ...); a table holds whole entries, rows
in (entry_id, batch_index) order; the same entries give the same rows whichever reader built them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa

from common.errors import InvariantViolation, MalformedFrame
from common.varint import encode_varint
from entries.entry import ENTRY_HEAD_BYTES, EntryInfo, crc32c_from, parse_entry
from offload.rows import (
    BLOCK,
    MD_NUM_MESSAGES,
    MD_PRODUCER_NAME,
    MD_PUBLISH_TIME,
    RAW,
    TIMESTAMP_TYPE,
    Members,
    RowGroup,
    message_id_prefix,
    set_fields,
    time_ms,
    unpack,
)

_U32 = struct.Struct(">I")

# Every column optional (Parquet's default from pyarrow): Iceberg refuses optional file columns
# in required table columns, and a table made from this schema takes every file we write.
MESSAGE_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("ledger_id", pa.int64()),
    pa.field("entry_id", pa.int64()),
    pa.field("batch_index", pa.int32()),
    pa.field("batch_size", pa.int32()),
    pa.field("offset", pa.int64()),       # Kafka offset; nullable like every column, set whenever known
    pa.field("message_id", pa.binary()),
    pa.field("key", pa.string()),
    pa.field("ordering_key", pa.binary()),
    pa.field("properties", pa.map_(pa.string(), pa.string())),
    pa.field("publish_time", TIMESTAMP_TYPE),
    pa.field("event_time", TIMESTAMP_TYPE),
    pa.field("producer_name", pa.string()),
    pa.field("sequence_id", pa.int64()),
    pa.field("payload", pa.binary()),
    # rebuild columns: not message data; what the broker needs to rebuild the stored entries
    pa.field("entry_rebuild", pa.int8()),
    pa.field("entry_crc32c", pa.int64()),
    pa.field("entry_metadata", pa.binary()),
    pa.field("message_metadata", pa.binary()),
    pa.field("entry_payload", pa.binary()),
])
REBUILD_COLUMNS = ("entry_id", "payload", "entry_rebuild", "entry_crc32c", "entry_metadata",
                   "message_metadata", "entry_payload")
REBUILD_SCHEMA = pa.schema([MESSAGE_SCHEMA.field(name) for name in REBUILD_COLUMNS])
MESSAGE_COLUMNS = tuple(MESSAGE_SCHEMA.names[:MESSAGE_SCHEMA.get_field_index("payload") + 1])
MESSAGE_ONLY_SCHEMA = pa.schema([MESSAGE_SCHEMA.field(name) for name in MESSAGE_COLUMNS])


@dataclass(frozen=True)
class LedgerOrigin:
    """Where a ledger's entries come from. topic: the full name, e.g.
    "persistent://t/ns/x-partition-3"; partition: its index, -1 if not a partition;
    first_offset: the Kafka offset of the ledger's first message, -1 if unknown."""
    topic: str
    partition: int
    ledger_id: int
    first_offset: int = -1


class EntryTableBuilder:
    """Buffers entries of one ledger as message-row columns; `take` turns them into a table."""

    def __init__(self, origin: LedgerOrigin, start_offset: int | None = None) -> None:
        """start_offset: the Kafka offset of the first entry added (default: the ledger's first
        offset, right when the first entry added is entry 0); -1 = unknown (null offsets)."""
        self.origin = origin
        self.next_offset = origin.first_offset if start_offset is None else start_offset   # -1: unknown
        self._group = RowGroup()
        self._producers: dict[str, int] = {}  # producer name -> index in the producer_name dictionary
        # message_id_prefix(ledger, entry, partition) = _id_head + varint(entry) + _id_tail
        self._id_head = message_id_prefix(origin.ledger_id, 0, -1)[:-1]
        self._id_tail = message_id_prefix(0, 0, origin.partition)[4:]
        self.first_entry_id: int | None = None   # None until the first add
        self.next_entry_id: int | None = None    # the entry id add expects next
        self.entries = 0
        self.messages = 0
        self.min_publish_time_ms: int | None = None  # over all entries; None: none yet
        self.max_publish_time_ms: int | None = None
        self.last_taken_entries = 0                  # entries in the table `take` returned last

    @property
    def bytes_buffered(self) -> int:
        """Payload (and kept block) bytes added since the last take."""
        return self._group.bytes_buffered

    def add(self, entry_id: int, data: bytes, messages: int | None = None) -> None:
        """Add the next entry (its stored bytes; `messages`: its message count as recorded,
        which its Kafka offsets follow; None: counted from the bytes)."""
        if self.next_entry_id is not None and entry_id != self.next_entry_id:
            raise InvariantViolation("entries must come in order", entry_id=entry_id,
                                     expected=self.next_entry_id)
        if self.first_entry_id is None:
            self.first_entry_id = entry_id
        self.next_entry_id = entry_id + 1
        data = bytes(data)
        group = self._group
        rows_before = len(group.payload)
        try:
            info = parse_entry(data)
            sound = crc32c_from(data, 6) == _U32.unpack_from(data, 2)[0]
        except MalformedFrame:
            info, sound = None, False
        group.entry_offsets.append(self.next_offset if self.next_offset >= 0 else None)
        if info is None or not sound:
            self._add_raw(entry_id, data)
            counted = 1
        else:
            counted = self._add_parsed(entry_id, data, info)
        if self.next_offset >= 0:
            self.next_offset += counted if messages is None else messages
        self.entries += 1
        self.messages += len(group.payload) - rows_before

    def _add_parsed(self, entry_id: int, data: bytes, info: EntryInfo) -> int:
        """Add a well-formed entry; its message count by the broker's rule."""
        group = self._group
        fields = set_fields(info.metadata)
        rebuild, messages = unpack(info, fields, data)
        self._add_entry(entry_id, rebuild, _U32.unpack_from(data, 2)[0],
                        data[ENTRY_HEAD_BYTES:info.payload_offset], fields[MD_PUBLISH_TIME],
                        fields[MD_PRODUCER_NAME], fields.get(MD_NUM_MESSAGES, 0))
        if rebuild == BLOCK:
            group.entry_payload[-1] = data[info.payload_offset:]
            group.bytes_buffered += len(data) - info.payload_offset
        if isinstance(messages, Members):
            group.add_members(messages)
        else:  # non-batched, or opaque (None): one row from the entry's metadata
            group.add_single(fields, messages)
        return max(1, fields[MD_NUM_MESSAGES]) if MD_NUM_MESSAGES in fields else 1

    def _add_raw(self, entry_id: int, data: bytes) -> None:
        """An entry kept verbatim: one row with no message data."""
        group = self._group
        self._add_entry(entry_id, RAW, None, None, None, None, 0)
        group.entry_payload[-1] = data
        group.bytes_buffered += len(data)
        group.add_single(None, None)

    def _add_entry(self, entry_id: int, rebuild: int, crc: int | None, md_bytes: bytes | None,
                   publish_ms: int | None, producer: str | None, batch_size: int) -> None:
        group = self._group
        group.entry_ids.append(entry_id)
        group.id_prefixes.append(self._id_head + encode_varint(entry_id) + self._id_tail)
        group.rebuild.append(rebuild)
        group.crcs.append(crc)
        group.entry_metadata.append(md_bytes)
        group.entry_payload.append(None)
        group.batch_sizes.append(batch_size)
        if publish_ms is not None:
            publish_ms = time_ms(publish_ms)
        group.publish_ms.append(publish_ms)
        if publish_ms is not None:
            if self.min_publish_time_ms is None or publish_ms < self.min_publish_time_ms:
                self.min_publish_time_ms = publish_ms
            if self.max_publish_time_ms is None or publish_ms > self.max_publish_time_ms:
                self.max_publish_time_ms = publish_ms
        index = self._producers.setdefault(producer, len(self._producers)) if producer is not None else -1
        group.producer_index.append(index)

    def take(self) -> pa.Table | None:
        """The rows added since the last take, as one MESSAGE_SCHEMA table (None if none)."""
        group = self._group
        if not group.entry_ids:
            return None
        origin = self.origin
        table = pa.Table.from_arrays(group.arrays(origin.topic, origin.partition, origin.ledger_id,
                                                  list(self._producers)), schema=MESSAGE_SCHEMA)
        self.last_taken_entries = len(group.entry_ids)
        self._group = RowGroup()
        return table
