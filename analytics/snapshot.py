"""What a query sees, taken on the driver at planning time: for every topic partition, its kept
ledgers and the last confirmed entry of the open one.

    snapshots = take_snapshots(options)       # one PartitionSnapshot per topic partition

How: the topic list comes from the metadata store (`/admin/partitioned-topics`, `/topics`, the
managed ledger records at `/managed-ledgers/<name>`); nothing goes through a broker's read path.
A ledger is cold when its record has a cold copy (read from S3, even while the bookie copy is
still there), else hot (read from the bookies, its ledger metadata shipped with the slice).
Kafka offsets: each ledger's first offset comes from its record; a hot ledger also brings the
message counts of its entries from its index blob (the closed one's, or the open one's last
checkpoint, which may cover only a prefix), so a hot slice starting mid-ledger knows its first
offset (`LedgerInSnapshot.offset_of`).
The open ledger ends at its last confirmed entry: the broker's (`lastConfirmedEntry` of
internalStats, one small HTTP call, when `admin.url` is set), else the bookies' LAC, which
trails the newest entry until the next add (a piggybacked LAC).
When the cluster enforces authorization (its `/admin/security` record), every topic goes through
`analytics.authorization.TopicGate` first, and the admin calls carry the query's credentials.

What must hold: a snapshot lists whole entries that are durable (at or below a last confirmed
entry), each ledger once, in ledger order; taking it writes nothing but the reader's own
metadata session. An unknown topic is TopicNotFound, unless the role may not consume it
(SourceAccessDenied, whether it exists or not).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import struct
import zlib
from dataclasses import dataclass

from analytics.access import ClusterAccess
from analytics.authorization import TopicGate, admin_get, topic_url
from analytics.options import Position, SourceOptions
from bookie.link_auth import link_config
from common.clock import SYSTEM_CLOCK
from common.errors import StrataError, TopicNotFound
from common.topic_names import PARTITIONED_ROOT, TOPICS_ROOT, TopicName, parse_topic
from ledger.entry_index import EntryIndex
from ledger.ledger_metadata import LedgerMetadata, ledger_path
from ledger.ledger_store import BookiePool
from ledger.ml_metadata import ManagedLedgerMetadata, index_path, ml_path
from metadata import MetadataStore, open_store

log = logging.getLogger(__name__)
ADMIN_TIMEOUT_S = 10.0
BOOKIE_LAC_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class LedgerInSnapshot:
    ledger_id: int
    entries: int                  # entries 0..entries-1 are in the snapshot
    size_bytes: int               # stored bytes (closed ledgers; an estimate for the open one)
    messages: int                 # messages (closed ledgers; an estimate for the open one)
    first_publish_ms: int         # 0: unknown (the open ledger)
    last_publish_ms: int
    cold_key: str                 # "" = read from the bookies
    metadata_json: bytes          # the ledger's metadata (hot ledgers), b"" for cold ones
    cold_bytes: int = 0           # the offloaded object's size
    first_offset: int = -1        # Kafka offset of its first message; -1: unknown (record not migrated)
    msg_end: tuple[int, ...] = () # hot ledgers: messages in entries 0..i, as far as its index blob goes

    def offset_of(self, entry: int) -> int:
        """Kafka offset of `entry`'s first message; -1 if unknown (beyond the index blob)."""
        if self.first_offset < 0 or entry > len(self.msg_end) or (entry > 0 and not self.msg_end):
            return -1
        return self.first_offset + (self.msg_end[entry - 1] if entry > 0 else 0)

    def offset_anchor(self, entry: int) -> tuple[int, int]:
        """(the last entry at or before `entry` whose offset is known, its offset), (-1, -1) when
        the ledger has none: a reader counts the messages of the entries from there to `entry`
        (the open ledger's index blob is a checkpoint, at most a checkpoint interval behind)."""
        if self.first_offset < 0:
            return -1, -1
        known = min(entry, len(self.msg_end))
        return known, self.offset_of(known)


@dataclass(frozen=True)
class PartitionSnapshot:
    topic: str                    # the partition's full name
    partition: int                # -1: not a partition
    ledgers: tuple[LedgerInSnapshot, ...]

    @property
    def first(self) -> Position:
        """The first kept position (the end, if nothing is kept)."""
        for ledger in self.ledgers:
            if ledger.entries:
                return ledger.ledger_id, 0
        return self.end

    @property
    def end(self) -> Position:
        """The position after the last confirmed entry."""
        if not self.ledgers:
            return 0, 0
        last = self.ledgers[-1]
        return last.ledger_id, last.entries


def resolve_topics(store: MetadataStore, options: SourceOptions, gate: TopicGate) -> list[TopicName]:
    """The topic partitions the options name, in name order (a partitioned topic: its partitions);
    the gate refuses a named topic before its existence is looked at, and drops a pattern's others."""
    if options.pattern:
        pattern = re.compile(options.pattern)
        names = [name for name in _all_topics(store)
                 if pattern.fullmatch(str(name)) or pattern.fullmatch(str(name.base))]
        return gate.readable(sorted(names, key=str))
    gate.require(options.topics)
    out: list[TopicName] = []
    for text in options.topics:
        name = parse_topic(text)
        partitions = _partition_count(store, name)
        if partitions:
            out.extend(name.partition(i) for i in range(partitions))
        elif store.get(f"{TOPICS_ROOT}/{name.path}") is not None or store.get(ml_path(name.managed_ledger_name)):
            out.append(name)
        else:
            raise TopicNotFound("topic not found: no such topic or partitioned topic in the metadata store",
                                topic=str(name))
    return out


def _partition_count(store: MetadataStore, name: TopicName) -> int:
    if name.partition_index >= 0:
        return 0
    found = store.get(f"{PARTITIONED_ROOT}/{name.path}")
    return int(json.loads(found.value)["partitions"]) if found is not None else 0


def _all_topics(store: MetadataStore) -> list[TopicName]:
    out = []
    for tenant in store.children(TOPICS_ROOT):
        for namespace in store.children(f"{TOPICS_ROOT}/{tenant}"):
            for local in store.children(f"{TOPICS_ROOT}/{tenant}/{namespace}"):
                out.append(parse_topic(f"persistent://{tenant}/{namespace}/{local}"))
    return out


def take_snapshots(options: SourceOptions) -> list[PartitionSnapshot]:
    store = open_store(options.access.require_metadata())
    try:
        names = resolve_topics(store, options, TopicGate.of_store(store, options.access))
        return [snapshot_partition(store, name, options.access) for name in names]
    finally:
        store.close()


def snapshot_partition(store: MetadataStore, name: TopicName, access: ClusterAccess) -> PartitionSnapshot:
    broker_lac = _broker_last_confirmed(access, name) if access.admin_url else None
    found = store.get(ml_path(name.managed_ledger_name))
    records = ManagedLedgerMetadata.from_json(found.value, found.version).ledgers if found is not None else ()
    ledgers: list[LedgerInSnapshot] = []
    for record in records:
        if broker_lac is not None and record.ledger_id > broker_lac[0]:
            break                                   # created after the broker's answer
        if record.closed:
            entries = record.entries
            if broker_lac is not None and record.ledger_id == broker_lac[0]:
                entries = min(entries, broker_lac[1] + 1)
        elif broker_lac is not None:
            entries = broker_lac[1] + 1 if record.ledger_id == broker_lac[0] else 0
        else:
            entries = -1                            # the bookies' LAC, below
        cold = record.cold.key if record.cold is not None else ""
        meta = b""
        if not cold:
            got = store.get(ledger_path(record.ledger_id))
            if got is None:
                continue                           # deleted since the record was read: nothing to read
            meta = got.value
            if entries < 0:
                entries = _bookie_lac(LedgerMetadata.from_json(meta)) + 1
        ledgers.append(LedgerInSnapshot(record.ledger_id, max(entries, 0), record.size_bytes, record.messages,
                                        record.first_publish_ms, record.last_publish_ms, cold, meta,
                                        record.cold.size_bytes if record.cold is not None else 0,
                                        record.first_offset, _msg_end(store, name, record.ledger_id) if meta else ()))
    return PartitionSnapshot(str(name), name.partition_index, tuple(ledgers))


def _msg_end(store: MetadataStore, name: TopicName, ledger_id: int) -> tuple[int, ...]:
    """The running message counts of a hot ledger's index blob; () if none or unreadable."""
    got = store.get(index_path(name.managed_ledger_name, ledger_id))
    if got is None:
        return ()
    try:
        return tuple(EntryIndex.from_blob(got.value).msg_end)
    except (StrataError, ValueError, zlib.error, struct.error):
        return ()


def _broker_last_confirmed(access: ClusterAccess, name: TopicName) -> Position | None:
    try:
        stats = json.loads(admin_get(access, topic_url(access.admin_url, name, "/internalStats"), ADMIN_TIMEOUT_S))
        ledger, _, entry = str(stats["lastConfirmedEntry"]).partition(":")
        return int(ledger), int(entry)
    except (StrataError, ValueError, KeyError) as exc:
        log.warning("admin %s did not give %s's last confirmed entry (%s); using the bookies' LAC",
                    access.admin_url, name, exc)
        return None


def _bookie_lac(meta: LedgerMetadata) -> int:
    """The highest LAC the open ledger's last ensemble reports (-1 if none answers)."""
    if meta.is_closed:
        return meta.last_entry_id

    async def ask() -> int:
        pool = BookiePool(link_config(), SYSTEM_CLOCK)   # the bookie secret / TLS files from STRATA_*
        try:
            answers = await asyncio.gather(*(asyncio.wait_for(pool.get(b).read_lac(meta.ledger_id),
                                                              BOOKIE_LAC_TIMEOUT_S)
                                             for b in meta.last_ensemble), return_exceptions=True)
        finally:
            await pool.close()
        lacs = [a[0] for a in answers if not isinstance(a, BaseException)]
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, (StrataError, TimeoutError)):
                raise answer
        return max(lacs, default=meta.fragments[-1].first_entry_id - 1)

    return asyncio.run(ask())
