"""The few facts a dispatcher needs about a stored entry, read from its outer metadata.

`entry_facts(data)` parses the entry's MessageMetadata once (via `broker.entry_format`) and
returns how many permits it costs (`messages`), whether it is a client batch (then a batch ack
set may apply), its Key_Shared hash slot, its publish time and its delayed-delivery time.
Stored bytes are never modified.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.entry_format import parse_entry
from broker.murmur3 import key_slot


@dataclass(frozen=True)
class EntryFacts:
    messages: int          # permits this entry costs: batch size, or 1
    is_batch: bool         # metadata has num_messages_in_batch (batch-index acks apply)
    slot: int              # Key_Shared hash slot 0..65535 of the sticky key
    publish_time_ms: int
    deliver_at_ms: int | None = None   # MessageMetadata.deliver_at_time; None: not delayed


def entry_facts(data: bytes) -> EntryFacts:
    parsed = parse_entry(data)
    return EntryFacts(
        messages=max(1, parsed.num_messages),
        is_batch=parsed.is_batch,
        slot=key_slot(parsed.sticky_key),
        publish_time_ms=parsed.publish_time_ms,
        deliver_at_ms=parsed.deliver_at_time_ms,
    )
