"""A consumer group's committed offsets, kept as the mark-delete of a durable subscription.

Kafka's consumer groups commit "the next offset to read" per partition. Strata keeps that as the
subscription named after the group on the partition's topic: committing offset o seeks the cursor
to the entry holding o, so everything before that entry counts as acked (a cumulative ack), and
the exact offset and the committed metadata string go into the cursor's persisted properties. So a
group's backlog, retention, TTL, backlog quota and explain-storage work as for any subscription,
and `strata admin` shows and moves it.

Reading it back (`committed`): when the cursor's mark-delete is still where the last commit put
it, the exact offset is returned; when something else moved it since (TTL, a backlog-quota
eviction, an admin reset-cursor, skip or clear-backlog), the first offset after the new
mark-delete is. A commit after such a move only moves the cursor forward: a live member still
committing its old position does not undo an expiry (Kafka's commits may go back; ours may too,
as long as nothing else moved the cursor since the group's last commit).

Both protocols on one subscription: a commit is refused (ConsumerBusy) while Pulsar consumers are
attached, and a Pulsar consumer is refused (`check_pulsar_attach`) while the subscription belongs
to a live Kafka group. Admin moves of a live group's subscription are refused
(`check_admin_move`): as in Kafka, a group's offsets are changed from outside only while it is
empty, so its members learn the new position from OffsetFetch when they next join.

What must hold: a commit is durable (the cursor written to the metadata store) before `commit`
returns; `committed` never returns an offset past the log end; nothing here deletes data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.records import groups
from common.errors import ConsumerBusy, InvalidPosition, NotAllowed, StrataError, SubscriptionNotFound
from common.topic_names import TopicName, parse_topic
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic
    from metadata.api import AsyncStore

GROUP = "kafka.group"          # the group that owns the subscription
OFFSET = "kafka.offset"        # the exact offset last committed
METADATA = "kafka.metadata"    # the metadata string last committed
MARK = "kafka.md"              # the mark-delete that commit left ("ledger:entry")
METADATA_CHARS_MAX = 4096      # Kafka's offset.metadata.max.bytes


def _mark(position: Position) -> str:
    return f"{position[0]}:{position[1]}"


def group_of(sub: Subscription) -> str | None:
    """The Kafka group that owns `sub`, if any."""
    return sub.cursor.properties.get(GROUP)


async def commit(topic: PersistentTopic, group: str, offset: int, metadata: str) -> None:
    """Commit `offset` (the next to read) for `group` on `topic`, durably."""
    sub = topic.subscriptions.get(group)
    if sub is not None and sub.consumers:
        raise ConsumerBusy(f"subscription {group!r} has Pulsar consumers: the Kafka group {group!r} "
                           "cannot commit on it", topic=str(topic.name))
    ml = topic.ml
    offset = min(max(offset, ml.log_start_offset), ml.end_offset)   # what the cursor can say
    target = ml.entry_for_offset(offset)
    if sub is None:
        sub = await topic.subscription(group, durable=True, start=target)
    cursor = sub.cursor
    props = dict(cursor.properties)
    md = cursor.mark_delete_position
    moved_by_other = GROUP in props and props.get(MARK) != _mark(md)
    ours = props.get(GROUP) == group
    if not ours or not moved_by_other or target >= ml.next_position(md):
        cursor.seek(target)
        props.update({OFFSET: str(offset), MARK: _mark(cursor.mark_delete_position)})
    props.update({GROUP: group, METADATA: metadata})
    cursor.set_properties(props)
    await cursor.flush(force=True)


def committed(topic: PersistentTopic, group: str) -> tuple[int, str] | None:
    """(offset, metadata) committed by `group` on `topic`, None when it has no subscription here.
    A subscription the group never committed on (a Pulsar one) reads as its mark-delete."""
    sub = topic.subscriptions.get(group)
    if sub is None:
        return None
    cursor = sub.cursor
    props = cursor.properties
    md = cursor.mark_delete_position
    metadata = props.get(METADATA, "")
    ml = topic.ml
    if props.get(MARK) == _mark(md) and OFFSET in props:
        return min(int(props[OFFSET]), ml.end_offset), metadata
    first_unread = ml.next_position(md)
    if first_unread > ml.last_confirmed:
        return ml.end_offset, metadata
    try:
        return ml.offset_of(first_unread), metadata
    except InvalidPosition:
        return ml.log_start_offset, metadata


async def forget(topic: PersistentTopic, group: str) -> bool:
    """Delete `group`'s subscription on `topic` (DeleteGroups, OffsetDelete); False if none."""
    sub = topic.subscriptions.get(group)
    if sub is None:
        return False
    if sub.consumers:
        raise ConsumerBusy(f"subscription {group!r} has Pulsar consumers: it is not the Kafka group's to delete",
                           topic=str(topic.name))
    try:
        await topic.unsubscribe(sub, None)
    except SubscriptionNotFound:
        return False
    return True


async def check_pulsar_attach(astore: AsyncStore, sub: Subscription) -> None:
    """A Pulsar consumer may not attach to the subscription of a live Kafka group."""
    group = group_of(sub)
    if group is not None and await groups.is_live(astore, group):
        raise ConsumerBusy(f"subscription {sub.name!r} belongs to the Kafka consumer group {group!r}, which has "
                           "live members: stop them (or use another subscription name)",
                           topic=str(sub.topic.name))


async def check_admin_move(astore: AsyncStore, sub: Subscription) -> None:
    """An admin reset, skip or clear-backlog changes a Kafka group's offsets only while the group is
    empty (as Kafka's tools require): its members read the new offsets when they next join."""
    group = group_of(sub)
    if group is not None and await groups.is_live(astore, group):
        raise NotAllowed(f"subscription {sub.name!r} is the Kafka consumer group {group!r}, which has live "
                         "members: a group's offsets change only while it is empty (stop its consumers, "
                         "then retry)", topic=str(sub.topic.name))


# --- many partitions at once, on the broker that serves them (the coordinator, or a peer) ------------

GetTopic = Callable[[TopicName], Awaitable["PersistentTopic"]]
OPS = ("commit", "fetch", "forget")


async def apply(get_topic: GetTopic, op: str, group: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run `op` for `group` on each item ({"topic": full name, "offset", "metadata"} for a commit;
    {"topic"} otherwise) on this broker; one answer per item, in order: {"topic", "offset",
    "metadata", "found"} or {"topic", "error": {"code", "message"}} (a StrataError's code)."""
    if op not in OPS:
        raise NotAllowed(f"unknown group-offset operation {op!r}")
    out = []
    for item in items:
        name = str(item.get("topic", ""))
        try:
            topic = await get_topic(parse_topic(name))
            if op == "commit":
                metadata = str(item.get("metadata") or "")
                await commit(topic, group, int(item["offset"]), metadata)
                out.append({"topic": name, "offset": int(item["offset"]), "metadata": metadata, "found": True})
            elif op == "fetch":
                found = committed(topic, group)
                out.append({"topic": name, "offset": found[0] if found else -1,
                            "metadata": found[1] if found else "", "found": found is not None})
            else:
                out.append({"topic": name, "found": await forget(topic, group)})
        except StrataError as exc:
            out.append({"topic": name, "error": {"code": exc.code, "message": exc.message}})
        except (KeyError, TypeError, ValueError) as exc:
            out.append({"topic": name, "error": {"code": NotAllowed.code, "message": f"bad item: {exc}"}})
    return out
