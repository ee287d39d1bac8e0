"""Ledger metadata: the one record, at `/ledgers/<id>`, that says where a ledger's entries live.

A ledger is striped over an ensemble of E bookies; each entry is written to Qw of them and is
acknowledged once Qa hold it durably. When a bookie fails mid-write the writer replaces it, and
the change is recorded as a new *fragment*: `(first_entry_id, ensemble)` pairs, ordered by first
entry id, the last one being the ensemble new entries go to. Entry `e` lives on the ensemble of
the last fragment whose first entry id is <= e.

The record only changes by compare-and-set on its store version, through `LedgerMetadata`'s
methods that return a new value (the dataclass is frozen): `with_state()` is the one setter of
`state` and refuses illegal transitions; `with_fragment()` appends an ensemble change;
`with_fragment_ensemble()` moves an existing fragment to other bookies (re-replication).

What must hold:
- Fragments are non-empty, start at entry 0, and their first entry ids strictly increase.
- Every ensemble has exactly E distinct bookies; E >= Qw >= Qa >= 1.
- A CLOSED ledger's `last_entry_id` and `length_bytes` are final (-1 / 0 when empty).
"""

from __future__ import annotations

import bisect
import enum
import itertools
import json
from dataclasses import dataclass, field, replace

from common.errors import IllegalTransition
from common.invariant import invariant, present

LEDGERS_PATH = "/ledgers"
METADATA_FORMAT_VERSION = 1


def ledger_path(ledger_id: int) -> str:
    """`/ledgers/00000000000000000042`: zero-padded so children sort in id order."""
    return f"{LEDGERS_PATH}/{ledger_id:020d}"


class LedgerStatus(enum.Enum):
    OPEN = "OPEN"                  # a writer may add entries; last_entry_id is not yet known
    IN_RECOVERY = "IN_RECOVERY"    # a recoverer fenced the ledger and is finding its last entry
    CLOSED = "CLOSED"              # sealed: last_entry_id and length_bytes are final


# state -> states it may move to. IN_RECOVERY -> IN_RECOVERY is allowed (a recoverer may re-mark
# a ledger whose recoverer died), though ledger.recovery leaves an IN_RECOVERY ledger as it is.
_TRANSITIONS: dict[LedgerStatus, frozenset[LedgerStatus]] = {
    LedgerStatus.OPEN: frozenset({LedgerStatus.IN_RECOVERY, LedgerStatus.CLOSED}),
    LedgerStatus.IN_RECOVERY: frozenset({LedgerStatus.IN_RECOVERY, LedgerStatus.CLOSED}),
    LedgerStatus.CLOSED: frozenset(),
}


@dataclass(frozen=True)
class Fragment:
    first_entry_id: int
    ensemble: tuple[str, ...]      # bookie addresses "host:port", position = ensemble index
    # Ensemble indexes whose bookie a recoverer put in (ledger.recovery): it never got the
    # writer's adds, so its "no such entry" says nothing about what the writer had acknowledged.
    # Empty for the writer's fragments (a writer's replacement gets every unconfirmed add).
    recovery_indexes: tuple[int, ...] = ()


@dataclass(frozen=True)
class LedgerMetadata:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    fragments: tuple[Fragment, ...]
    created_ms: int
    state: LedgerStatus = LedgerStatus.OPEN
    last_entry_id: int = -1        # final only when CLOSED; -1 = no entry
    length_bytes: int = 0          # sum of payload sizes of entries 0..last_entry_id when CLOSED
    properties: dict[str, str] = field(default_factory=dict)
    version: int = 0               # store version this value was read at / written as; 0 = never stored

    def __post_init__(self) -> None:
        e, qw, qa = self.ensemble_size, self.write_quorum, self.ack_quorum
        invariant(e >= qw >= qa >= 1, "E >= Qw >= Qa >= 1", E=e, Qw=qw, Qa=qa)
        invariant(self.fragments and self.fragments[0].first_entry_id == 0,
                  "fragments start at entry 0", ledger=self.ledger_id)
        firsts = [f.first_entry_id for f in self.fragments]
        invariant(all(a < b for a, b in itertools.pairwise(firsts)),
                  "fragment first entry ids strictly increase", firsts=firsts)
        for frag in self.fragments:
            invariant(len(frag.ensemble) == e and len(set(frag.ensemble)) == e,
                      "an ensemble has E distinct bookies", ensemble=frag.ensemble)
            invariant(all(0 <= i < e for i in frag.recovery_indexes), "recovery indexes in range",
                      indexes=frag.recovery_indexes)

    # --- reading -------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerStatus.CLOSED

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        return self.fragments[-1].ensemble

    def fragment_index(self, entry_id: int) -> int:
        firsts = [f.first_entry_id for f in self.fragments]
        return max(0, bisect.bisect_right(firsts, entry_id) - 1)

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble that holds entry `entry_id`."""
        return self.fragments[self.fragment_index(entry_id)].ensemble

    def all_bookies(self) -> set[str]:
        return {b for f in self.fragments for b in f.ensemble}

    # --- the only ways to change it -------------------------------------------------------------

    def with_state(self, state: LedgerStatus, *, last_entry_id: int | None = None,
                   length_bytes: int | None = None) -> LedgerMetadata:
        """The single setter of `state`; refuses transitions the state machine forbids."""
        if state not in _TRANSITIONS[self.state]:
            raise IllegalTransition(f"ledger {self.ledger_id}: {self.state.value} -> {state.value}")
        if state is LedgerStatus.CLOSED:
            last_entry_id = present(last_entry_id, "closing records last entry id", ledger=self.ledger_id)
            length_bytes = present(length_bytes, "closing records length", ledger=self.ledger_id)
            invariant(last_entry_id >= -1 and length_bytes >= 0, "sane close values",
                      last=last_entry_id, length=length_bytes)
            return replace(self, state=state, last_entry_id=last_entry_id, length_bytes=length_bytes)
        return replace(self, state=state)

    def with_fragment(self, first_entry_id: int, ensemble: tuple[str, ...], *,
                      recovery_indexes: tuple[int, ...] = ()) -> LedgerMetadata:
        """An ensemble change: entries from `first_entry_id` on live on `ensemble`. Made by the
        writer (OPEN) or by a recoverer re-replicating the tail past a dead bookie (IN_RECOVERY,
        naming the indexes it filled in `recovery_indexes`)."""
        invariant(self.state is not LedgerStatus.CLOSED, "a closed ledger gets no new fragment",
                  state=self.state.value)
        invariant(not recovery_indexes or self.state is LedgerStatus.IN_RECOVERY,
                  "only a recoverer fills indexes", state=self.state.value)
        fragment = Fragment(first_entry_id, tuple(ensemble), tuple(sorted(set(recovery_indexes))))
        frags = list(self.fragments)
        if frags[-1].first_entry_id == first_entry_id:
            frags[-1] = fragment     # writer: nothing written to it yet; recoverer: same tail
        else:
            invariant(first_entry_id > frags[-1].first_entry_id, "fragments only move forward",
                      first=first_entry_id, last_first=frags[-1].first_entry_id)
            frags.append(fragment)
        return replace(self, fragments=tuple(frags))

    def with_fragment_ensemble(self, fragment_index: int, ensemble: tuple[str, ...]) -> LedgerMetadata:
        """Re-replication: fragment `fragment_index` now lives on `ensemble` (its entries were
        copied there first). Allowed in any state: the entries do not change, only who holds them."""
        invariant(0 <= fragment_index < len(self.fragments), "fragment exists",
                  ledger=self.ledger_id, fragment_index=fragment_index)
        frags = list(self.fragments)
        old = frags[fragment_index]
        frags[fragment_index] = Fragment(old.first_entry_id, tuple(ensemble), old.recovery_indexes)
        return replace(self, fragments=tuple(frags))

    def fragment_last_entry_id(self, fragment_index: int) -> int | None:
        """Last entry of a fragment: the next fragment's first - 1, or for the last fragment the
        ledger's last entry if CLOSED (None while open: not final yet)."""
        if fragment_index + 1 < len(self.fragments):
            return self.fragments[fragment_index + 1].first_entry_id - 1
        return self.last_entry_id if self.is_closed else None

    def with_version(self, version: int) -> LedgerMetadata:
        return replace(self, version=version)

    # --- encoding --------------------------------------------------------------------------------

    def to_json(self) -> bytes:
        doc = {
            "format": METADATA_FORMAT_VERSION,
            "ledger_id": self.ledger_id,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "state": self.state.value,
            "last_entry_id": self.last_entry_id,
            "length_bytes": self.length_bytes,
            "created_ms": self.created_ms,
            "fragments": [[f.first_entry_id, list(f.ensemble)]
                          + ([list(f.recovery_indexes)] if f.recovery_indexes else [])
                          for f in self.fragments],
            "properties": dict(self.properties),
        }
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes, version: int = 0) -> LedgerMetadata:
        doc = json.loads(raw)
        invariant(doc.get("format") == METADATA_FORMAT_VERSION, "known ledger metadata format",
                  format=doc.get("format"))
        return cls(
            ledger_id=int(doc["ledger_id"]),
            ensemble_size=int(doc["ensemble_size"]),
            write_quorum=int(doc["write_quorum"]),
            ack_quorum=int(doc["ack_quorum"]),
            fragments=tuple(Fragment(int(f[0]), tuple(f[1]), tuple(int(i) for i in f[2]) if len(f) > 2 else ())
                            for f in doc["fragments"]),
            created_ms=int(doc["created_ms"]),
            state=LedgerStatus(doc["state"]),
            last_entry_id=int(doc["last_entry_id"]),
            length_bytes=int(doc["length_bytes"]),
            properties={str(k): str(v) for k, v in doc.get("properties", {}).items()},
            version=version,
        )
