"""Per-entry index of one ledger: size, message count and publish time of every entry.

The broker gives these facts at append time (the managed ledger never parses entries), and the
cursor arithmetic above (backlog in messages/bytes, TTL, seek by time) reads them from here
instead of reading entries back. Arrays are compact (`array` of machine ints): 32 bytes/entry.

`publish_max[i]` is the running maximum of publish times up to entry i. Publish times come from
client clocks and need not increase, but the running maximum does, so "first entry whose publish
time is >= t" is a bisect over it (the first i with publish_max[i] >= t is exactly that entry).

`msg_end[i]` is the number of messages in entries 0..i (a running sum of `messages`), so the
entry holding the ledger's n-th message (0-based) is a bisect too: the first i with
msg_end[i] > n. Kafka offsets within a ledger (`ledger.view`) are answered from it.

Persistence: when a ledger closes its index is written once as a blob (`to_blob()`): a header,
then zlib-compressed sizes, messages and *delta-encoded* publish times (deltas of close-together
timestamps compress to almost nothing). `publish_max` and `msg_end` are derived, never stored.

What must hold: all arrays have the same length = number of entries; sizes >= 0, messages >= 1;
msg_end strictly increases and msg_end[-1] == total_messages.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from array import array

from common.invariant import invariant

_MAGIC = b"SIDX"
_HEADER = struct.Struct("<4sBQ")        # magic, format version, entry count
_FORMAT = 1


class EntryIndex:
    __slots__ = ("messages", "msg_end", "publish_max", "publish_ms", "sizes", "total_bytes", "total_messages")

    def __init__(self) -> None:
        self.sizes = array("Q")          # payload bytes of entry i
        self.messages = array("Q")       # messages in entry i (a client batch counts as its messages)
        self.publish_ms = array("q")     # publish time of entry i, as the broker gave it
        self.publish_max = array("q")    # running max of publish_ms[0..i]
        self.msg_end = array("Q")        # messages in entries 0..i (running sum of `messages`)
        self.total_bytes = 0
        self.total_messages = 0

    def __len__(self) -> int:
        return len(self.sizes)

    def append(self, size_bytes: int, messages: int, publish_time_ms: int) -> None:
        invariant(size_bytes >= 0 and messages >= 1, "sane entry facts", size=size_bytes, messages=messages)
        self.sizes.append(size_bytes)
        self.messages.append(messages)
        self.publish_ms.append(publish_time_ms)
        prev = self.publish_max[-1] if self.publish_max else publish_time_ms
        self.publish_max.append(max(prev, publish_time_ms))
        self.total_bytes += size_bytes
        self.total_messages += messages
        self.msg_end.append(self.total_messages)

    def truncate(self, count: int) -> None:
        """Keep only the first `count` entries (a recovered ledger ended before what we recorded)."""
        invariant(0 <= count <= len(self), "truncate within the index", count=count, have=len(self))
        for arr in (self.sizes, self.messages, self.publish_ms, self.publish_max, self.msg_end):
            del arr[count:]
        self.total_bytes = sum(self.sizes)
        self.total_messages = sum(self.messages)

    def first_at_or_after(self, publish_time_ms: int) -> int:
        """Index of the first entry with publish time >= t; len(self) if none."""
        return bisect.bisect_left(self.publish_max, publish_time_ms)

    def messages_before(self, entry: int) -> int:
        """Messages in entries 0..entry-1: the ledger-relative offset of entry's first message."""
        return self.msg_end[entry - 1] if entry > 0 else 0

    def entry_of_message(self, message: int) -> int:
        """Index of the entry holding the ledger's `message`-th message (0-based); len(self) if
        the ledger has no more than `message` messages."""
        return bisect.bisect_right(self.msg_end, message)

    @property
    def first_publish_ms(self) -> int:
        return self.publish_ms[0] if self.publish_ms else 0

    @property
    def last_publish_ms(self) -> int:
        return self.publish_ms[-1] if self.publish_ms else 0

    # --- persistence -----------------------------------------------------------------------------

    def to_blob(self) -> bytes:
        deltas = array("q", self.publish_ms)
        for i in range(len(deltas) - 1, 0, -1):
            deltas[i] -= deltas[i - 1]
        body = self.sizes.tobytes() + self.messages.tobytes() + deltas.tobytes()
        return _HEADER.pack(_MAGIC, _FORMAT, len(self)) + zlib.compress(body, 6)

    @classmethod
    def from_blob(cls, blob: bytes) -> EntryIndex:
        magic, fmt, count = _HEADER.unpack_from(blob)
        invariant(magic == _MAGIC and fmt == _FORMAT, "known entry index blob", magic=magic, fmt=fmt)
        body = zlib.decompress(blob[_HEADER.size:])
        invariant(len(body) == 24 * count, "entry index blob length", count=count, body=len(body))
        sizes, messages, deltas = array("Q"), array("Q"), array("q")
        sizes.frombytes(body[: 8 * count])
        messages.frombytes(body[8 * count: 16 * count])
        deltas.frombytes(body[16 * count:])
        index = cls()
        publish = 0
        for i in range(count):
            publish = deltas[i] if i == 0 else publish + deltas[i]
            index.append(sizes[i], messages[i], publish)
        return index
