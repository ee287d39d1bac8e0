"""Pulsar's storage policies enforced on one loaded topic: persistence (the quorums of its new
ledgers, its cursors' mark-delete rate), deduplicationSnapshotInterval and delayedDelivery.

Each is read through the broker's policy view (topic > namespace > broker, `broker.limits.view`)
when the topic loads (`quorum` before its managed ledger opens, `apply` before any client
attaches) and again whenever a policy of its namespace or of the topic changes (`apply`, called
by the service's policy listener). What each change does, and when:

- persistence, ensemble and quorums: the managed ledger creates its NEXT ledger with them
  (`ManagedLedger.set_quorum`): the next rollover, or the first ledger of the next load (an
  unload makes it immediate). The open ledger keeps its own; ledgers already written never
  change. A value the bookies cannot meet fails the ledger's creation as any too-small cluster
  does (NotEnoughBookies below Qw writable bookies; a smaller ensemble, down to Qw, when there
  are fewer than E: `ledger.placement.choose_ensemble`), and the producer's sends fail with it.
- persistence, managedLedgerMaxMarkDeleteRate (r per second, 0: no limit): each durable cursor
  of the topic persists its mark-delete position at most r times a second
  (`CursorPersistence.set_persist_interval_ms`: 1/r, never below `cursor_persist_interval_ms`).
  Acks move the position in memory at once; only the writes to the metadata store are spaced.
- deduplicationSnapshotInterval (seconds): the longest time stored entries wait for a dedup
  snapshot (`Deduplication.interval_s`); 0 takes none by time, only every
  `broker_dedup_snapshot_interval_entries` entries (Pulsar's takeSnapshot skips interval <= 0).
  Unset at both levels: `broker_dedup_snapshot_interval_ms`, to the millisecond. Live.
- delayedDelivery: tickTime is the delayed index's tick of every Shared/Key_Shared dispatcher;
  active=false delivers delayed messages at once (those already held are released);
  maxDeliveryDelayInMillis > 0 refuses at publish a message whose deliver_at is further than
  that from its publish time (`DelayedDelivery.refusal`, NotAllowedError, Pulsar's text). Live.

What must hold: `topic.storage` always says what the topic's ledgers, cursors, dedup and
dispatchers were last told; an `apply` that fails to read a policy changes nothing.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.limits import persistence
from broker.limits.persistence import DelayedDelivery, StorageCounters
from broker.topics.dispatch.shared import SharedDispatcher
from common.config import Config
from common.topic_names import TopicName

if TYPE_CHECKING:
    from broker.limits.spec import PolicySpec
    from broker.limits.view import PolicyView
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicStorage:
    """A loaded topic's storage policies as last applied (the broker's settings until then)."""

    quorum: tuple[int, int, int]         # (E, Qw, Qa) of its next ledger
    cursor_persist_interval_ms: int      # least time between two persists of one of its cursors
    dedup_snapshot_interval_s: float     # longest wait of stored entries for a snapshot; inf: none by time
    delayed: DelayedDelivery

    @classmethod
    def defaults(cls, config: Config) -> TopicStorage:
        return cls((config.ledger_ensemble_size, config.ledger_write_quorum, config.ledger_ack_quorum),
                   config.cursor_persist_interval_ms, config.broker_dedup_snapshot_interval_ms / 1000,
                   DelayedDelivery.of(persistence.DELAYED_DELIVERY.default(config)))


async def quorum(view: PolicyView, name: TopicName) -> tuple[int, int, int]:
    """(E, Qw, Qa) the topic's ledgers are created with (its persistence policy)."""
    return persistence.quorum_of(await view.value(name, persistence.PERSISTENCE))


async def read(view: PolicyView, name: TopicName, config: Config) -> TopicStorage:
    """The topic's storage policies as they are now."""
    value = await view.value(name, persistence.PERSISTENCE)
    snapshot_s = await _explicit(view, name, persistence.DEDUP_SNAPSHOT_INTERVAL)
    return TopicStorage(
        persistence.quorum_of(value),
        persistence.mark_delete_interval_ms(value, config.cursor_persist_interval_ms),
        config.broker_dedup_snapshot_interval_ms / 1000 if snapshot_s is None
        else (float(snapshot_s) if snapshot_s > 0 else math.inf),
        DelayedDelivery.of(await view.value(name, persistence.DELAYED_DELIVERY)))


async def apply(topic: PersistentTopic, view: PolicyView, counters: StorageCounters | None = None) -> None:
    """Read the topic's storage policies and hand each part what changed; `counters`, the
    broker's, count what they do from then on."""
    if counters is not None:
        topic.dedup.counters = counters
    now = await read(view, topic.name, topic.config)
    before, topic.storage = topic.storage, now
    if now.quorum != topic.ml.quorum:
        topic.ml.set_quorum(*now.quorum)
        log.info("%s: new ledgers get ensemble %d, write quorum %d, ack quorum %d (persistence policy)",
                 topic.name, *now.quorum)
    for sub in list(topic.subscriptions.values()):
        limit_cursor(sub, now)
    topic.dedup.interval_s = now.dedup_snapshot_interval_s
    if now.delayed != before.delayed:
        for sub in list(topic.subscriptions.values()):
            if isinstance(sub.dispatcher, SharedDispatcher):
                sub.dispatcher.set_delayed_policy(now.delayed)
        log.info("%s: delayed delivery %s, tick %d ms, max delay %d ms (delayedDelivery policy)", topic.name,
                 "on" if now.delayed.active else "off", now.delayed.tick_ms, now.delayed.max_delay_ms)


def limit_cursor(sub: Subscription, storage: TopicStorage) -> None:
    """A durable subscription's cursor persists at most as often as the topic's policy allows."""
    if sub.durable:
        sub.cursor.persistence.set_persist_interval_ms(storage.cursor_persist_interval_ms)


async def _explicit(view: PolicyView, name: TopicName, spec: PolicySpec) -> int | None:
    """The topic's own value, else its namespace's; None when neither sets one (the caller then
    uses the broker setting at its full precision, not the spec's rounded default)."""
    own = (await view.topic_doc(name)).get(spec.key)
    if own is not None:
        return own
    return (await view.namespace_doc(name.tenant, name.namespace)).get(spec.key)
