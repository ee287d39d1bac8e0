"""Placement: which bookies a new ledger (or a replacement) goes to.

Bookies register an ephemeral key `/bookies/available/<host:port>` holding JSON
`{"address", "free_bytes", "read_only", "corrupt"}` (`corrupt`: entries the bookie found rotten
on its disk, for ledger/repair.py); the key vanishes when the bookie dies (lease expiry).
`available_bookies()` reads them; `choose()` picks distinct writable bookies at random (seeded
`random.Random`, injected), skipping read-only ones and an `exclude` set (the ensemble already in
use, bookies that just failed). Too few candidates is `NotEnoughBookies` (retriable: bookies
come back). `replace()` is the ensemble change both the writer and recovery make: the same
ensemble with some indexes given new bookies.

Live bookies first: a bookie killed -9 stays registered until its session lease expires (10 s by
default), so a client that just saw it fail puts it in quarantine (`BookieHealth`, for
`ledger_bookie_quarantine_ms`). `choose_ensemble()` (a new ledger) and `replace()` pick
quarantined bookies only when the others are too few. ★ Beyond BookKeeper: a new ledger whose
E bookies are not there but at least Qw are gets a smaller ensemble (E' = the bookies there,
never below Qw), recorded as that ledger's ensemble size; fewer than Qw is NotEnoughBookies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from common.errors import NotEnoughBookies, NotFound
from metadata.api import AsyncStore

AVAILABLE_PATH = "/bookies/available"


@dataclass(frozen=True)
class BookieInfo:
    address: str
    free_bytes: int
    read_only: bool
    # (ledger, entry) pairs the bookie found corrupt and awaits a good copy of; () = none.
    corrupt: tuple[tuple[int, int], ...] = ()


async def available_bookies(store: AsyncStore) -> list[BookieInfo]:
    """Every registered bookie with its last reported state (one `list_prefix` round trip: every
    writer that loses a bookie asks, all at once); unreadable entries are skipped."""
    try:
        rows = await store.list_prefix(AVAILABLE_PATH)
    except NotFound:
        return []
    out = []
    for path, got in rows:
        name = path[len(AVAILABLE_PATH) + 1:]
        if not path.startswith(AVAILABLE_PATH + "/") or not name or "/" in name:
            continue                      # the prefix itself, or something deeper
        try:
            doc = json.loads(got.value)
            out.append(BookieInfo(str(doc.get("address", name)), int(doc.get("free_bytes", 0)),
                                  bool(doc.get("read_only", False)), corrupt_entries(doc)))
        except (ValueError, TypeError, AttributeError):
            continue
    return out


def corrupt_entries(doc: object) -> tuple[tuple[int, int], ...]:
    """The `corrupt` list of a registration doc (parsed JSON); () when absent or malformed."""
    raw = doc.get("corrupt") if isinstance(doc, dict) else None
    try:
        return tuple((int(ledger), int(entry)) for ledger, entry in raw or ())
    except (ValueError, TypeError):
        return ()


class BookieHealth:
    """Bookies this client saw fail lately (an add or a connection refused), kept for
    `quarantine_s`: placement avoids them while others are there. Bounded by the number of
    bookies (one entry per address; expired entries are dropped when read)."""

    def __init__(self, quarantine_s: float, monotonic: Callable[[], float]) -> None:
        self.quarantine_s = quarantine_s
        self._monotonic = monotonic
        self._until_s: dict[str, float] = {}    # address -> monotonic end of its quarantine

    def failed(self, address: str) -> None:
        self._until_s[address] = self._monotonic() + self.quarantine_s

    def answered(self, address: str) -> None:
        """It answered a probe: out of quarantine."""
        self._until_s.pop(address, None)

    def quarantined(self) -> set[str]:
        now_s = self._monotonic()
        for address in [a for a, until in self._until_s.items() if until <= now_s]:
            del self._until_s[address]
        return set(self._until_s)


def _writable(candidates: Iterable[BookieInfo], excluded: set[str]) -> list[str]:
    return sorted({b.address for b in candidates if not b.read_only and b.address not in excluded})


def choose(candidates: Iterable[BookieInfo], count: int, rng: random.Random, *,
           exclude: Iterable[str] = (), quarantined: Iterable[str] = ()) -> list[str]:
    """`count` distinct writable bookie addresses not in `exclude`, in random order; quarantined
    ones only when the others are too few."""
    excluded = set(exclude)
    usable = _writable(candidates, excluded)
    if len(usable) < count:
        raise NotEnoughBookies(f"need {count} writable bookies, have {len(usable)}",
                               available=usable, excluded=sorted(excluded))
    suspect = set(quarantined)
    healthy = [a for a in usable if a not in suspect]
    if len(healthy) >= count:
        return rng.sample(healthy, count)
    return rng.sample(healthy, len(healthy)) + rng.sample([a for a in usable if a in suspect],
                                                          count - len(healthy))


def choose_ensemble(candidates: Iterable[BookieInfo], ensemble_size: int, write_quorum: int,
                    rng: random.Random, *, quarantined: Iterable[str] = ()) -> list[str]:
    """The ensemble of a new ledger: `ensemble_size` bookies, or fewer (never below
    `write_quorum`) when fewer are there. Healthy bookies (not quarantined) are enough when at
    least Qw of them are: a smaller ensemble of live bookies beats a full one naming a bookie
    that just failed. NotEnoughBookies (retriable) below Qw writable bookies."""
    candidates = list(candidates)
    usable = _writable(candidates, set())
    if len(usable) < write_quorum:
        raise NotEnoughBookies(f"need at least {write_quorum} writable bookies (Qw) for a new ledger, "
                               f"have {len(usable)}", available=usable, ensemble_size=ensemble_size)
    suspect = set(quarantined)
    healthy = [a for a in usable if a not in suspect]
    size = min(ensemble_size, len(healthy) if len(healthy) >= write_quorum else len(usable))
    return choose(candidates, size, rng, quarantined=suspect)


def registered_addresses(candidates: Iterable[BookieInfo]) -> set[str]:
    """Addresses of the bookies that are registered (alive as far as the metadata store knows:
    a dead bookie's key vanishes once its lease expires), read-only ones included."""
    return {b.address for b in candidates}


def replace(candidates: Iterable[BookieInfo], ensemble: tuple[str, ...], indexes: Iterable[int],
            rng: random.Random, *, avoid: Iterable[str] = (), quarantined: Iterable[str] = ()) -> tuple[str, ...]:
    """`ensemble` with a new writable bookie at each of `indexes`, chosen among `candidates` not
    in the ensemble nor in `avoid` (bookies that just failed), quarantined ones last.
    NotEnoughBookies if too few."""
    replaced = sorted(set(indexes))
    out = list(ensemble)
    picks = choose(candidates, len(replaced), rng, exclude=set(ensemble) | set(avoid),
                   quarantined=quarantined)
    for index, address in zip(replaced, picks):
        out[index] = address
    return tuple(out)
