"""Reading a topic compacted: the compacted view first, then the tail after its horizon.

A consumer or reader that subscribes with `read_compacted=true` (Exclusive or Failover only, as
Pulsar: "Read compacted only allowed on failover or exclusive subscriptions") gets a
`CompactedReads` on its dispatcher (`broker.topics.dispatch.base.Dispatcher.compacted`). The dispatcher
then asks it first on every read:
- while the read position is at or before the view's horizon, entries come from the compacted
  ledger (the latest message of each key, at its original position, so message ids, acks and
  seeks mean what they always mean); keys compacted out and tombstones are simply not there;
- once the view has nothing at or after the read position, the read position moves to the first
  entry after the horizon and the topic is read as usual.
A batch of which only some members are the latest of their key goes out with the view's mask as
the MESSAGE's ack_set (intersected with the cursor's own batch acks), so the client skips the
others.

Where a subscription starts: a new subscription (a reader, or a durable one created by this
SUBSCRIBE) at Earliest reads the whole view, even the part whose ledgers retention has already
trimmed (Pulsar's NonDurableCursorImpl with isReadCompacted): compacted positions before the
topic's first kept entry then count as unacknowledged (`floor`). An existing subscription goes on
after its mark-delete position.

GET_LAST_MESSAGE_ID of such a consumer, when nothing follows the horizon, answers the view's last
entry (and its last kept batch member): a reader's has_message_available() otherwise waits for
a message that compaction removed.

What must hold: the view's entries go out in original-position order; no entry after the
horizon is skipped; nothing the view dropped is sent from the view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.compaction import format as fmt
from broker.topics.entry_facts import entry_facts
from common.errors import NotAllowed
from ledger.position import Position

if TYPE_CHECKING:
    from broker.compaction.topic_compaction import TopicCompaction
    from broker.topics.dispatch.base import Dispatcher
    from broker.topics.subscription import Subscription
    from ledger.types import Entry

BEFORE_EVERYTHING = Position(-1, -1)
_SINGLE_ACTIVE_TYPES = (0, 2)            # SubType.EXCLUSIVE, SubType.FAILOVER


class CompactedReads:
    def __init__(self, dispatcher: Dispatcher, compaction: TopicCompaction, floor: Position | None) -> None:
        self.dispatcher = dispatcher
        self.compaction = compaction
        # positions before `floor` count as unacked (a new subscription from Earliest); None: none do
        self.floor = floor
        self._masks: dict[Position, list[int]] = {}   # masks of the entries of the last view read

    async def read(self, max_entries: int) -> list[Entry] | None:
        """Entries from the view at the read position; [] when the view has none there (the read
        position is then after the horizon); None if the dispatcher was rewound meanwhile."""
        d = self.dispatcher
        view = self.compaction.view
        if view is None or d.read_position > view.horizon:
            return []
        epoch = d._epoch
        got = await view.read_from(d.read_position, max_entries)
        if epoch != d._epoch or d._closed:
            return None
        if got:
            self._masks = {entry.position: mask for entry, mask in got if mask is not None}
            return [entry for entry, _mask in got]
        after = d.sub.ml.next_position(view.horizon)
        if after > d.read_position:
            d.read_position = after
        return []

    def next_after(self, position: Position) -> Position:
        """The read position after sending `position`: inside the view, the very next position
        (the view is searched from there); after it, the topic's next entry."""
        view = self.compaction.view
        if view is not None and position <= view.horizon:
            return Position(position.ledger_id, position.entry_id + 1)
        return self.dispatcher.sub.ml.next_position(position)

    def is_acked(self, position: Position) -> bool:
        if self.floor is not None and position < self.floor and \
                self.dispatcher.sub.cursor.mark_delete_position < self.floor:
            return False
        return self.dispatcher.sub.cursor.is_acked(position)

    def rewind_position(self, default: Position) -> Position:
        """Where a rewind restarts: the view's start while nothing past the floor is acked."""
        if self.floor is not None and self.dispatcher.sub.cursor.mark_delete_position < self.floor:
            return BEFORE_EVERYTHING
        return default

    def ack_set(self, position: Position, ack_set: list[int] | None) -> list[int] | None:
        mask = self._masks.get(position)
        return ack_set if mask is None else fmt.intersect(mask, ack_set)


def check_subscribe(sub_type: int, read_compacted: bool) -> None:
    """SUBSCRIBE: read_compacted only on Exclusive/Failover (Pulsar's rule)."""
    if read_compacted and sub_type not in _SINGLE_ACTIVE_TYPES:
        raise NotAllowed("Read compacted only allowed on failover or exclusive subscriptions")


def attach(sub: Subscription, read_compacted: bool, from_earliest: bool) -> None:
    """After SUBSCRIBE added its consumer: make the dispatcher read compacted. `from_earliest`:
    the subscription was created by this SUBSCRIBE at Earliest (or is a reader at earliest)."""
    d = sub.dispatcher
    if not read_compacted or d is None or d.compacted is not None:
        return
    floor = sub.ml.first_position if from_earliest else None
    d.compacted = CompactedReads(d, sub.topic.compaction, floor)
    if floor is not None and len(d.consumers) == 1:
        d.seek(BEFORE_EVERYTHING)


async def last_message_id(sub: Subscription, last: Position) -> tuple[Position, int | None] | None:
    """For a read_compacted consumer with nothing after the horizon: the view's last message
    (position, batch index or None); None: answer the topic's last entry as usual."""
    d = sub.dispatcher
    if d is None or d.compacted is None:
        return None
    view = sub.topic.compaction.view
    if view is None or view.horizon < last:
        return None
    if view.entries == 0 or view.handle is None:
        return BEFORE_EVERYTHING, None
    got = await view.handle.read(view.entries - 1, view.entries - 1)
    position, mask, data = fmt.decode(got[0][1])
    facts = entry_facts(data)
    if not facts.is_batch:
        return position, None
    kept = [i for i in range(facts.messages) if fmt.mask_keeps(mask, i)]
    return position, (kept[-1] if kept else None)
