"""Start-up recovery: rebuild the in-memory index from the checkpoint, .idx files and replay.

Steps (all before the bookie accepts any request):
1. Read `checkpoint.json` (absent on a new bookie): the live ledgers' states and
   `replay_from_segment`.
2. Every segment below `replay_from_segment` is sealed: load its .idx and keep the entries of
   live ledgers. A segment there without an .idx is one GC was deleting when the bookie
   stopped (GC removes the .idx first): its live records were already copied, so it is removed.
3. Every segment from `replay_from_segment` on is replayed record by record (CREATE, ADD,
   FENCE, DELETE, in log order). Replay of a file stops at the first torn or invalid record
   and the file is truncated there, so a torn tail is never exposed and later appends never
   follow garbage.

Replay is idempotent: records between the checkpoint's snapshot and `replay_from_segment` may
be applied twice (LAC and last entry take maxima, fence is a flag, index inserts overwrite).

Returns the ids of the replayed segments; the caller seals them (writes their .idx) before it
writes a new checkpoint.
"""

from __future__ import annotations

import logging
import os
import re

from bookie.index import CHECKPOINT_NAME, Index, SegmentInfo, decode_checkpoint, decode_idx
from bookie.record import HEADER_BYTES, Record, RecordKind, RecordScanner
from common.invariant import invariant

log = logging.getLogger(__name__)
_SEGMENT_NAME = re.compile(r"^(\d{10})\.seg$")
_READ_CHUNK_BYTES = 8 * 1024 * 1024


def recover(index: Index, data_dir: str, segments_dir: str, payload_bytes_max: int) -> list[int]:
    invariant(not index.ledgers and not index.segments, "recover into an empty index")
    replay_from = 0
    checkpoint_path = os.path.join(data_dir, CHECKPOINT_NAME)
    if os.path.exists(checkpoint_path):
        with open(checkpoint_path, "rb") as f:
            replay_from, states = decode_checkpoint(f.read())
        for state in states:
            index.ledgers[state.ledger_id] = state
    _remove_temp_files(data_dir, segments_dir)
    segment_ids = sorted(int(m.group(1)) for name in os.listdir(segments_dir)
                         if (m := _SEGMENT_NAME.match(name)))
    replayed = []
    for segment_id in segment_ids:
        seg_path = os.path.join(segments_dir, f"{segment_id:010d}.seg")
        idx_path = os.path.join(segments_dir, f"{segment_id:010d}.idx")
        if segment_id < replay_from:
            if not os.path.exists(idx_path):
                log.warning("removing segment %s: half-collected by GC", segment_id)
                os.unlink(seg_path)
                continue
            _load_sealed(index, segment_id, seg_path, idx_path)
        else:
            if os.path.exists(idx_path):
                os.unlink(idx_path)  # replay rebuilds it; never trust an idx past the checkpoint
            _replay(index, segment_id, seg_path, payload_bytes_max)
            replayed.append(segment_id)
    return replayed


def _remove_temp_files(*directories: str) -> None:
    for directory in directories:
        for name in os.listdir(directory):
            if name.endswith(".tmp"):
                os.unlink(os.path.join(directory, name))


def _load_sealed(index: Index, segment_id: int, seg_path: str, idx_path: str) -> None:
    with open(idx_path, "rb") as f:
        quads = decode_idx(f.read(), idx_path)
    segment = SegmentInfo(segment_id, size_bytes=os.path.getsize(seg_path), sealed=True, quads=None)
    index.segments[segment_id] = segment
    index.load_sealed(segment, quads)


def _replay(index: Index, segment_id: int, seg_path: str, payload_bytes_max: int) -> None:
    segment = SegmentInfo(segment_id, size_bytes=0)
    index.segments[segment_id] = segment
    scanner = RecordScanner(payload_bytes_max=payload_bytes_max)
    with open(seg_path, "rb") as f:
        while not scanner.invalid:
            data = f.read(_READ_CHUNK_BYTES)
            if not data:
                break
            for record in scanner.feed(data):
                _apply(index, segment_id, record)
        file_bytes = f.seek(0, os.SEEK_END)
    if file_bytes != scanner.end_offset:
        log.warning("segment %s: cutting %d bytes of torn or invalid tail at offset %d",
                    segment_id, file_bytes - scanner.end_offset, scanner.end_offset)
        with open(seg_path, "r+b") as f:
            f.truncate(scanner.end_offset)
            f.flush()
            os.fsync(f.fileno())
    segment.size_bytes = scanner.end_offset


def _apply(index: Index, segment_id: int, record: Record) -> None:
    kind, ledger_id = record.kind, record.ledger_id
    state = index.ledgers.get(ledger_id)
    if kind is RecordKind.CREATE:
        if state is None:  # else: the checkpoint's snapshot already has this incarnation
            index.create_ledger(ledger_id, record.payload, segment_id)
        return
    if kind is RecordKind.DELETE:
        index.drop_ledger(ledger_id)
        return
    if state is None:
        state = index.create_ledger(ledger_id, b"", segment_id)
    if kind is RecordKind.FENCE:
        state.fenced = True
    elif kind is RecordKind.ADD:
        index.insert(state, record.entry_id, segment_id, record.offset, record.total_bytes,
                     record.lac, record.total_bytes - HEADER_BYTES)
