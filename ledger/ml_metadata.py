"""The managed ledger's record at `/managed-ledgers/<encoded name>`: its ordered ledger list.

The record is changed only by compare-and-set. Opening a managed ledger writes it (a new `owner`
token), which bumps its version: the previous owner's next compare-and-set (rollover, trim,
close) fails and it learns it was fenced out. Per ledger it keeps the facts stats need
(entries, bytes, messages, publish-time range); the per-entry index of a closed ledger is a
child key `/managed-ledgers/<encoded name>/index/<ledger id>`.

Names like `public/default/persistent/my-topic` become one path segment: every character outside
`[A-Za-z0-9_.:=@+-]` (including `%` itself and `/`) is percent-encoded, so the encoding is
reversible and two names never share a key.

Offload: a closed ledger's record gains `cold` (where its object is) only by a compare-and-set
made after the upload completed, and `bookie_deleted` only by a later one made before the bookie
copy is deleted; such a ledger stays in `ledgers` and is read from the cold tier.

Trimmed totals: `trimmed` sums the entries, messages and bytes of every ledger trimmed from
`ledgers` since the managed ledger was created, added in the same compare-and-set that drops them
(`without_trimmed`), so "ever stored" = `trimmed` + the kept ledgers' totals survives restarts
and trims (the topic's `msgInCounter`/`bytesInCounter` and internal stats' `entriesAddedCounter`
start there on load). A record written before the field existed reads as zeros.

Kafka offsets: a ledger's `first_offset` is the offset (message index in the managed ledger,
the first message ever stored being 0) of its first message, fixed when the ledger is added:
the previous ledger's first_offset + its final message count (it is sealed before the next one
is created), or `trimmed.messages` for the first ledger of a managed ledger. It never changes
afterwards: trims drop whole ledgers, offload and `bookie_deleted` keep the record, recovery
only closes a ledger (`ledger.view` answers offset questions from it). A record written before
the field existed reads as -1 ("not assigned"); `ManagedLedger` assigns those on open, from the
earliest kept ledger on (see `assign_first_offsets`).

Termination (Pulsar's `terminatedPosition`): `terminated` is the last position the managed
ledger will ever hold, written by the compare-and-set that follows sealing its last ledger. A
terminated managed ledger opens without a new ledger and takes no appends; a record without the
field is not terminated.

What must hold: ledger ids in the list strictly increase; only the last may be OPEN; a ledger id
is in `ledgers` or in `deleting`, never both; `bookie_deleted` implies `cold`; `trimmed` only
grows (a ledger's totals are added once, when it leaves `ledgers`); once `terminated` is set
every ledger is closed and it never changes again. Adjacent kept ledgers with assigned first
offsets chain exactly: `first_offset[i+1] == first_offset[i] + messages[i]`.
"""

from __future__ import annotations

import itertools
import json
import string
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from common.errors import InvalidArgument
from common.invariant import invariant
from ledger.cold import ColdCopy
from ledger.position import Position

ML_ROOT = "/managed-ledgers"
_SAFE = frozenset(string.ascii_letters + string.digits + "_.:=@+-")
_FORMAT = 1


def encode_name(name: str) -> str:
    if not name:
        raise InvalidArgument("empty managed ledger name")
    out = []
    for ch in name:
        if ch in _SAFE:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode())
    return "".join(out)


def ml_path(name: str) -> str:
    return f"{ML_ROOT}/{encode_name(name)}"


def index_root(name: str) -> str:
    return f"{ml_path(name)}/index"


def index_path(name: str, ledger_id: int) -> str:
    return f"{index_root(name)}/{ledger_id:020d}"


@dataclass(frozen=True)
class LedgerRecord:
    ledger_id: int
    closed: bool                 # False only for the current ledger of a live owner
    created_ms: int
    entries: int = 0             # exact once closed; 0 while open (the live owner knows better)
    size_bytes: int = 0
    messages: int = 0
    first_publish_ms: int = 0
    last_publish_ms: int = 0
    cold: ColdCopy | None = None     # set (by compare-and-set) once its offload is complete
    bookie_deleted: bool = False     # the bookie copy is gone (deletion lag passed): read from `cold`
    closed_ms: int = 0               # wall time it was sealed; 0 = open, or sealed before this was kept
    first_offset: int = -1           # Kafka offset of its first message; -1 = not assigned (older record)

    def to_doc(self) -> dict:
        doc: dict[str, object] = {
            "id": self.ledger_id, "closed": self.closed, "created_ms": self.created_ms,
            "entries": self.entries, "size_bytes": self.size_bytes, "messages": self.messages,
            "first_publish_ms": self.first_publish_ms, "last_publish_ms": self.last_publish_ms}
        if self.cold is not None:
            doc["cold"] = self.cold.to_doc()
        if self.bookie_deleted:
            doc["bookie_deleted"] = True
        if self.closed_ms:
            doc["closed_ms"] = self.closed_ms
        if self.first_offset >= 0:
            doc["first_offset"] = self.first_offset
        return doc

    @classmethod
    def from_doc(cls, doc: dict) -> LedgerRecord:
        cold = doc.get("cold")
        return cls(int(doc["id"]), bool(doc["closed"]), int(doc["created_ms"]), int(doc["entries"]),
                   int(doc["size_bytes"]), int(doc["messages"]), int(doc["first_publish_ms"]),
                   int(doc["last_publish_ms"]), ColdCopy.from_doc(cold) if cold is not None else None,
                   bool(doc.get("bookie_deleted", False)), int(doc.get("closed_ms", 0)),
                   int(doc.get("first_offset", -1)))

    @property
    def sealed_ms(self) -> int:
        """When it was sealed, as best known (its creation time for records older than closed_ms):
        the age auto-offload's offloadThresholdInSeconds counts from, as Pulsar's ledger timestamp."""
        return self.closed_ms or self.created_ms


class _Counted(Protocol):
    @property
    def entries(self) -> int: ...

    @property
    def messages(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...


@dataclass(frozen=True)
class LedgerTotals:
    """Entries, messages and bytes of some ledgers (all zero: none)."""

    entries: int = 0
    messages: int = 0
    size_bytes: int = 0

    def __add__(self, other: LedgerTotals) -> LedgerTotals:
        return LedgerTotals(self.entries + other.entries, self.messages + other.messages,
                            self.size_bytes + other.size_bytes)

    @classmethod
    def of(cls, ledgers: Iterable[_Counted]) -> LedgerTotals:
        """The totals of `ledgers` (LedgerRecord or LedgerInfo)."""
        total = cls()
        for ledger in ledgers:
            total += cls(ledger.entries, ledger.messages, ledger.size_bytes)
        return total

    def to_doc(self) -> dict:
        return {"entries": self.entries, "messages": self.messages, "size_bytes": self.size_bytes}

    @classmethod
    def from_doc(cls, doc: dict | None) -> LedgerTotals:
        doc = doc or {}
        return cls(int(doc.get("entries", 0)), int(doc.get("messages", 0)), int(doc.get("size_bytes", 0)))


@dataclass(frozen=True)
class ManagedLedgerMetadata:
    ledgers: tuple[LedgerRecord, ...] = ()
    owner: str = ""              # token of the instance that opened it last ("" = never opened)
    properties: dict[str, str] = field(default_factory=dict)
    version: int = 0             # store version it was read at; 0 = not stored yet
    # Ledgers trimmed from `ledgers` whose deletion from the bookies is not known to be done.
    # Written in the same compare-and-set that drops them, so a crash between the two steps
    # leaves a to-do list, not a leak: the next owner deletes them again (deletes are idempotent).
    deleting: tuple[int, ...] = ()
    trimmed: LedgerTotals = LedgerTotals()   # every ledger trimmed so far, summed
    terminated: Position | None = None       # the last position ever, once terminated

    def __post_init__(self) -> None:
        ids = [r.ledger_id for r in self.ledgers]
        invariant(all(a < b for a, b in itertools.pairwise(ids)), "ledger ids strictly increase", ids=ids)
        invariant(all(r.closed for r in self.ledgers[:-1]), "only the last ledger may be open", ids=ids)
        invariant(all(r.cold is not None for r in self.ledgers if r.bookie_deleted),
                  "a ledger whose bookie copy is gone has a cold copy", ids=ids)
        invariant(self.terminated is None or all(r.closed for r in self.ledgers),
                  "a terminated managed ledger has no open ledger", ids=ids)
        for a, b in itertools.pairwise(self.ledgers):
            if a.first_offset >= 0 and b.first_offset >= 0:
                invariant(b.first_offset == a.first_offset + a.messages,
                          "first offsets chain by the previous ledger's messages", ledger_id=b.ledger_id,
                          first_offset=b.first_offset, previous=a.first_offset, previous_messages=a.messages)

    def with_ledgers(self, ledgers: list[LedgerRecord] | tuple[LedgerRecord, ...]) -> ManagedLedgerMetadata:
        return replace(self, ledgers=tuple(ledgers))

    def with_deleting(self, ledger_ids) -> ManagedLedgerMetadata:
        return replace(self, deleting=tuple(sorted(set(ledger_ids))))

    def without_trimmed(self, ledger_ids: set[int]) -> ManagedLedgerMetadata:
        """Trim `ledger_ids`: out of `ledgers`, into `deleting`, their totals added to `trimmed`."""
        gone = [r for r in self.ledgers if r.ledger_id in ledger_ids]
        invariant(all(r.closed for r in gone), "only closed ledgers are trimmed",
                  ids=[r.ledger_id for r in gone if not r.closed])
        return replace(self, ledgers=tuple(r for r in self.ledgers if r.ledger_id not in ledger_ids),
                       deleting=tuple(sorted(set(self.deleting) | ledger_ids)),
                       trimmed=self.trimmed + LedgerTotals.of(gone))

    def with_properties(self, properties: dict[str, str]) -> ManagedLedgerMetadata:
        return replace(self, properties=dict(properties))

    def with_terminated(self, last: Position) -> ManagedLedgerMetadata:
        return replace(self, terminated=Position(*last))

    def with_owner(self, owner: str) -> ManagedLedgerMetadata:
        return replace(self, owner=owner)

    def with_version(self, version: int) -> ManagedLedgerMetadata:
        return replace(self, version=version)

    def to_json(self) -> bytes:
        doc = {"format": _FORMAT, "owner": self.owner, "properties": self.properties,
               "ledgers": [r.to_doc() for r in self.ledgers]}
        if self.deleting:
            doc["deleting"] = list(self.deleting)
        if self.trimmed != LedgerTotals():
            doc["trimmed"] = self.trimmed.to_doc()
        if self.terminated is not None:
            doc["terminated"] = [self.terminated.ledger_id, self.terminated.entry_id]
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes, version: int) -> ManagedLedgerMetadata:
        doc = json.loads(raw)
        invariant(doc.get("format") == _FORMAT, "known managed ledger format", format=doc.get("format"))
        terminated = doc.get("terminated")
        return cls(tuple(LedgerRecord.from_doc(d) for d in doc["ledgers"]), str(doc.get("owner", "")),
                   {str(k): str(v) for k, v in doc.get("properties", {}).items()}, version,
                   tuple(int(i) for i in doc.get("deleting", ())), LedgerTotals.from_doc(doc.get("trimmed")),
                   Position(int(terminated[0]), int(terminated[1])) if terminated is not None else None)


def assign_first_offsets(ledgers: Iterable[LedgerRecord], trimmed_messages: int) -> list[LedgerRecord]:
    """`ledgers` (closed, except perhaps the last) with every unassigned first offset filled in:
    the earliest gets `trimmed_messages` (every message ever stored and since trimmed), each next
    one the previous one's first offset + its messages. Assigned ones are kept as they are, so
    this is the identity on a record written since first offsets exist; on a record written
    before, it gives every ledger the offsets it would have had (the migration of older topics)."""
    out: list[LedgerRecord] = []
    following = trimmed_messages
    for record in ledgers:
        if record.first_offset < 0:
            record = replace(record, first_offset=following)
        out.append(record)
        following = record.first_offset + record.messages
    return out
