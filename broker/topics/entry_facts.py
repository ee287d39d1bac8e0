"""The few facts a dispatcher needs about a stored entry, parsed once and shared.

`entry_facts(data)` parses the entry's MessageMetadata (via `entries.entry`) and returns
how many permits it costs (`messages`), whether it is a client batch (then a batch ack set may
apply), its publish time, its delayed-delivery time and its sticky key. The Key_Shared hash
slot (`slot`) is computed from the sticky key only when asked for (only Key_Shared asks), with
the C `mmh3` (`broker.topics.dispatch.key_selector.key_slot`), and then kept.

`FactsCache` keeps the facts of recently seen entries by position, one per topic, so an entry
read by several subscriptions (or appended by a producer that already parsed it) is parsed once.
An entry at a position never changes, so a cached fact is never stale.

What must hold: facts are a pure function of the entry bytes; the cache holds at most
`entries_max` facts; stored bytes are never modified.
"""

from __future__ import annotations

from collections import OrderedDict

from broker.topics.dispatch.key_selector import key_slot
from entries.entry import EntryInfo, parse_entry
from ledger.position import Position

# Facts kept per topic: a few dispatch reads' worth (a read is at most a few hundred entries).
FACTS_CACHE_ENTRIES_MAX = 4096


class EntryFacts:
    __slots__ = ("_slot", "deliver_at_ms", "is_batch", "messages", "publish_time_ms", "sticky_key")

    def __init__(self, messages: int, is_batch: bool, publish_time_ms: int,
                 deliver_at_ms: int | None, sticky_key: bytes) -> None:
        self.messages = messages                # permits this entry costs: batch size, or 1
        self.is_batch = is_batch                # num_messages_in_batch present (batch-index acks)
        self.publish_time_ms = publish_time_ms
        self.deliver_at_ms = deliver_at_ms      # MessageMetadata.deliver_at_time; None: not delayed
        self.sticky_key = sticky_key            # Key_Shared routing key
        self._slot = -1                         # hash slot, computed on first use

    @property
    def slot(self) -> int:
        """Key_Shared hash slot 0..65535 of the sticky key (murmur3, Pulsar's)."""
        if self._slot < 0:
            self._slot = key_slot(self.sticky_key)
        return self._slot


def facts_of_info(info: EntryInfo) -> EntryFacts:
    """The facts of an entry already parsed (the producer parsed it on SEND)."""
    md = info.metadata
    is_batch = md.HasField("num_messages_in_batch")
    return EntryFacts(
        messages=max(1, md.num_messages_in_batch) if is_batch else 1,
        is_batch=is_batch,
        publish_time_ms=md.publish_time,
        deliver_at_ms=md.deliver_at_time if md.HasField("deliver_at_time") else None,
        sticky_key=info.sticky_key,
    )


def entry_facts(data: bytes) -> EntryFacts:
    return facts_of_info(parse_entry(data))


class FactsCache:
    """Facts of recently appended or read entries by position (bounded, least recently added
    first out)."""

    def __init__(self, entries_max: int = FACTS_CACHE_ENTRIES_MAX) -> None:
        self.entries_max = entries_max
        self._facts: OrderedDict[Position, EntryFacts] = OrderedDict()

    def __len__(self) -> int:
        return len(self._facts)

    def get(self, position: Position, data: bytes) -> EntryFacts:
        """The facts of the entry `data` stored at `position`, parsed only if not kept."""
        facts = self._facts.get(position)
        if facts is None:
            facts = entry_facts(data)
            self.put(position, facts)
        return facts

    def put(self, position: Position, facts: EntryFacts) -> None:
        cache = self._facts
        cache[position] = facts
        if len(cache) > self.entries_max:
            cache.popitem(last=False)
