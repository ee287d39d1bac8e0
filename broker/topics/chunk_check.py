"""Chunk metadata a producer sends, checked before the chunk is stored.

The broker stores each chunk of a chunked message as its own entry and never reassembles:
consumers do. But a chunk whose metadata lies does harm downstream. The official C++ consumer
(pulsar-client 3.13) takes a message with `num_chunks_from_msg` <= 1 for a whole one (a lone
chunk reaches the application as if complete), keeps a chunk whose `chunk_id` is past the end
as an ack hole it never acks, drops the whole message on a repeated or missing chunk id (its
chunks then stay unacked), and copies chunks into a buffer of `total_chunk_msg_size` bytes without
a bounds check, so a message whose chunks add up to more than its total crashes it (SIGSEGV) —
every consumer of the topic, each time the entry is delivered. So a SEND is refused
(SEND_ERROR NotAllowed, nothing stored, the producer stays usable) when:

- on its own: `num_chunks_from_msg` < 1; `chunk_id` outside [0, num_chunks); chunk fields
  without a `uuid`; `total_chunk_msg_size` smaller than this chunk's payload;
- within one producer session, against the chunked message under way (`ChunkCheck`): a chunk
  whose id is not the next one (a gap or a repeat), whose num_chunks or total differ from the
  earlier chunks', that takes the bytes past the total, or a last chunk that leaves them short of
  it (checked only when the session saw the message from chunk 0).

A session that starts in the middle of a message (the client reconnected after some chunks were
stored and resends the rest) is checked from the first chunk it sees. The official clients send
the chunks of a message one after another; chunks of different messages interleaved are checked
against whichever message came last and otherwise let through, never refused for that alone.
A refused chunk does not advance the record, so the client may send the right chunk next.

What must hold: a well-formed chunk sequence, with or without a reconnect in the middle, is
never refused; the record is O(1) per producer.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.errors import InvalidArgument
from entries.entry import EntryInfo


@dataclass
class _Message:
    """The chunked message under way in this session."""

    uuid: str
    num_chunks: int
    total_bytes: int        # total_chunk_msg_size of its chunks
    next_chunk_id: int      # the chunk id that may come next
    bytes_seen: int         # payload bytes of the chunks accepted in this session
    from_first: bool        # the session saw chunk 0, so bytes_seen is the whole so far


def has_chunk_fields(info: EntryInfo) -> bool:
    md = info.metadata
    return md.HasField("num_chunks_from_msg") or md.HasField("chunk_id")


def stateless_refusal(info: EntryInfo, payload_bytes: int) -> InvalidArgument | None:
    """Why this chunk's metadata cannot be right, on its own; None if it can."""
    md = info.metadata
    chunks, chunk_id, total = md.num_chunks_from_msg, md.chunk_id, md.total_chunk_msg_size
    if not md.HasField("num_chunks_from_msg") or chunks < 1:
        return InvalidArgument("chunk with num_chunks_from_msg below 1", num_chunks_from_msg=chunks)
    if not 0 <= chunk_id < chunks:
        return InvalidArgument("chunk_id outside [0, num_chunks_from_msg)", chunk_id=chunk_id,
                               num_chunks_from_msg=chunks)
    if not md.HasField("uuid") or not md.uuid:
        return InvalidArgument("chunk without uuid", chunk_id=chunk_id)
    if total < payload_bytes:
        return InvalidArgument("chunk larger than total_chunk_msg_size", chunk_bytes=payload_bytes,
                               total_chunk_msg_size=total)
    return None


class ChunkCheck:
    """The chunked message under way on one producer session (None: no chunk seen yet)."""

    def __init__(self) -> None:
        self._message: _Message | None = None

    def refusal(self, info: EntryInfo, payload_bytes: int) -> InvalidArgument | None:
        """None if the chunk may be stored (and then it is recorded); else why not."""
        if not has_chunk_fields(info):
            return None
        error = stateless_refusal(info, payload_bytes)
        if error is None:
            error = self._sequence_refusal(info, payload_bytes)
        if error is None:
            self._record(info, payload_bytes)
        return error

    def _sequence_refusal(self, info: EntryInfo, payload_bytes: int) -> InvalidArgument | None:
        md = info.metadata
        message = self._message
        if message is None or message.uuid != md.uuid:
            return None     # a new message, or one this session joined in the middle
        if md.chunk_id == 0 or md.chunk_id != message.next_chunk_id:
            return InvalidArgument("chunk out of sequence: a gap or a repeat", uuid=md.uuid,
                                   chunk_id=md.chunk_id, expected=message.next_chunk_id)
        if (md.num_chunks_from_msg, md.total_chunk_msg_size) != (message.num_chunks, message.total_bytes):
            return InvalidArgument("chunk disagrees with the earlier chunks of its message",
                                   uuid=md.uuid, num_chunks_from_msg=md.num_chunks_from_msg,
                                   total_chunk_msg_size=md.total_chunk_msg_size,
                                   earlier_num_chunks=message.num_chunks,
                                   earlier_total=message.total_bytes)
        seen = message.bytes_seen + payload_bytes
        if seen > message.total_bytes:
            return InvalidArgument("chunks add up to more than total_chunk_msg_size", uuid=md.uuid,
                                   chunk_id=md.chunk_id, bytes=seen, total_chunk_msg_size=message.total_bytes)
        last = md.chunk_id == message.num_chunks - 1
        if last and message.from_first and seen != message.total_bytes:
            return InvalidArgument("chunks add up to less than total_chunk_msg_size", uuid=md.uuid,
                                   bytes=seen, total_chunk_msg_size=message.total_bytes)
        return None

    def _record(self, info: EntryInfo, payload_bytes: int) -> None:
        md = info.metadata
        message = self._message
        if md.chunk_id == md.num_chunks_from_msg - 1:
            self._message = None    # complete (or a one-chunk message): nothing under way
        elif message is not None and message.uuid == md.uuid:
            message.next_chunk_id += 1
            message.bytes_seen += payload_bytes
        else:
            self._message = _Message(md.uuid, md.num_chunks_from_msg, md.total_chunk_msg_size,
                                     md.chunk_id + 1, payload_bytes, md.chunk_id == 0)
