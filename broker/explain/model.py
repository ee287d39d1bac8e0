"""The values `explain-storage` computes (`broker.explain.analysis`) and reads (its facts).

Inputs: `Settings` (the broker settings it quotes) and `StorageFacts` (what the admin handler read
from the metadata store). Outputs: per ledger a `LedgerExplanation` (what keeps it, when it goes,
its parts), per durable subscription a `SubscriptionExplanation` (its backlog, what it pins, what
acting on it alone would free and who else keeps those ledgers), the decomposition (`Part`s, in
`CATEGORIES` order) and the advice lines, all in one `StorageExplanation`.

What must hold: a ledger's `parts` sum to its `size_bytes`; the decomposition sums to
`storage_size_bytes`; every value is frozen (one explanation is one state of the topic).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.retention.offload import OffloadPolicy
from common.config import Config
from cursor.retention import RetentionPolicy
from ledger.ml_metadata import LedgerRecord
from ledger.position import Position

# The decomposition's parts, in the order they are shown (JSON name, label for people).
UNCONSUMED = "unconsumedBacklog"
PINNED = "ackedButPinned"
RETAINED = "retainedByPolicy"
OPEN = "openLedger"
OFFLOADED = "offloaded"
AWAITING_TRIM = "awaitingTrim"
COMPACTED = "compactedLedger"      # the topic's compacted view, its own ledger (broker.compaction)
CATEGORIES: tuple[tuple[str, str], ...] = (
    (UNCONSUMED, "unconsumed by some subscription"),
    (PINNED, "acked but pinned (ack holes, partly consumed ledgers)"),
    (RETAINED, "retained by policy"),
    (OPEN, "open ledger"),
    (OFFLOADED, "offloaded"),
    (AWAITING_TRIM, "awaiting the next retention pass"),
)
# the part a compacted topic adds after those (`broker.explain.analysis.with_compacted`)
COMPACTED_CATEGORY = (COMPACTED, "compacted view (its own ledger)")


# --- inputs ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """The broker settings the explanation quotes (from `common.config.Config`)."""
    rollover_entries: int            # managed_ledger_rollover_entries
    rollover_bytes: int              # managed_ledger_rollover_bytes
    rollover_age_ms: int             # managed_ledger_rollover_age_ms
    rollover_min_age_ms: int         # managed_ledger_rollover_min_age_ms
    retention_check_interval_ms: int  # broker_retention_check_interval_ms
    s3_bucket: str                   # offload_s3_bucket ("" when there is no cold tier)

    @classmethod
    def of(cls, config: Config) -> Settings:
        return cls(config.managed_ledger_rollover_entries, config.managed_ledger_rollover_bytes,
                   config.managed_ledger_rollover_age_ms, config.managed_ledger_rollover_min_age_ms,
                   config.broker_retention_check_interval_ms,
                   config.offload_s3_bucket if config.offload_driver else "")


@dataclass(frozen=True)
class StorageFacts:
    """What the admin handler read for the analysis (effective policies, records, ensembles)."""
    retention: RetentionPolicy
    ttl_seconds: int                                  # effective message TTL; 0 = off
    offload: OffloadPolicy
    settings: Settings
    records: Mapping[int, LedgerRecord] = field(default_factory=dict)   # ledger id -> its ML record
    bookies: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # ledger id -> its bookies


# --- outputs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Keeper:
    """One reason a ledger (or, for "offloadDeletionLag", its bookie copy) is kept."""
    kind: str                  # open | lastLedger | subscription | retention | offloadDeletionLag | nothing
    detail: str                # one line for people
    subscription: str | None = None   # kind "subscription": its name
    unacked_entries: int = 0   # kind "subscription": its unacked entries in this ledger
    ack_holes: int = 0         # kind "subscription": its ack holes over the whole topic


@dataclass(frozen=True)
class LedgerExplanation:
    ledger_id: int
    entries: int
    size_bytes: int
    state: str                         # open | closed | offloaded
    created_ms: int
    first_publish_ms: int              # 0 when empty
    last_publish_ms: int               # 0 when empty
    bookies: tuple[str, ...]           # bookies of its ensembles; () when the bookie copy is gone
    bookie_copy: bool                  # False once the deletion lag removed it (read from S3)
    s3_key: str | None                 # offloaded: the object's key; None otherwise
    offloaded_ms: int | None           # offloaded: when the upload completed
    unacked_entries: int               # entries some durable subscription has not acked
    kept_by: tuple[Keeper, ...]
    goes_at_ms: int | None             # earliest time it can go; None: waits for an ack/rollover/never
    goes: str                          # when it goes, for people
    bookie_copy_goes_at_ms: int | None  # offloaded, bookie copy still there, lag >= 0: when it goes
    parts: Mapping[str, int]           # category -> bytes; sums to size_bytes


@dataclass(frozen=True)
class CoKeeper:
    """Another subscription that keeps some ledger a subscription pins (so acting on that one
    alone does not free it)."""
    name: str
    unacked_entries: int               # over the whole topic
    ack_holes: int                     # over the whole topic


@dataclass(frozen=True)
class SubscriptionExplanation:
    name: str
    mark_delete: Position
    backlog_entries: int               # msgBacklog (exact)
    backlog_messages: int              # messages of those entries (batch members acked on their own excluded)
    backlog_bytes: int                 # backlogSize (exact)
    ack_holes: int                     # unacked entries below its highest individually acked one
    oldest_unacked: Position | None    # the entry after its mark-delete; None: nothing unacked
    oldest_unacked_publish_ms: int | None
    pinned_ledgers: int                # closed ledgers it has not passed (its mark-delete is before their end)
    pinned_bytes: int                  # their bytes
    pinned_acked_bytes: int            # the bytes of them it has acked (exact)
    # What acting on it alone would do: it acks (skips, expires) every entry it has not acked,
    # every other subscription and the policies as they are.
    released_bytes: int                # ledgers no subscription would keep any more (retention may)
    freeable_bytes: int                # of those, the bytes the next retention pass would trim
    co_keepers: tuple[CoKeeper, ...]  # other subscriptions keeping ledgers it pins
    freeable_with_co_keepers_bytes: int  # trimmed if it and every co-keeper acted


@dataclass(frozen=True)
class Part:
    category: str
    label: str
    size_bytes: int
    percent: float                     # of storage_size_bytes, rounded to 0.01
    ledgers: int                       # ledgers with bytes in this part


@dataclass(frozen=True)
class StorageExplanation:
    topic: str
    now_ms: int
    storage_size_bytes: int
    backlog_size_bytes: int            # the topic's backlogSize: the largest durable subscription's
    backlog_subscription: str | None   # that subscription (None without one)
    retention: RetentionPolicy
    ttl_seconds: int
    offload_deletion_lag_ms: int
    settings: Settings
    ledgers: tuple[LedgerExplanation, ...]
    subscriptions: tuple[SubscriptionExplanation, ...]
    decomposition: tuple[Part, ...]
    advice: tuple[str, ...]
    compacted: LedgerExplanation | None = None   # the compacted ledger's row; None: not compacted
