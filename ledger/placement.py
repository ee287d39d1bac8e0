"""Placement: which bookies a new ledger (or a replacement) goes to.

Bookies register an ephemeral key `/bookies/available/<host:port>` holding JSON
`{"address", "free_bytes", "read_only"}`; the key vanishes when the bookie dies (lease expiry).
`available_bookies()` reads them; `choose()` picks distinct writable bookies at random (seeded
`random.Random`, injected), skipping read-only ones and an `exclude` set (the ensemble already in
use, bookies that just failed). Too few candidates is `NotEnoughBookies` (retriable: bookies
come back). `replace()` is the ensemble change both the writer and recovery make: the same
ensemble with some indexes given new bookies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass

from common.errors import NotEnoughBookies, NotFound
from metadata.api import AsyncStore

AVAILABLE_PATH = "/bookies/available"


@dataclass(frozen=True)
class BookieInfo:
    address: str
    free_bytes: int
    read_only: bool


async def available_bookies(store: AsyncStore) -> list[BookieInfo]:
    """Every registered bookie with its last reported state; unreadable entries are skipped."""
    try:
        names = await store.children(AVAILABLE_PATH)
    except NotFound:
        return []
    out = []
    for name in names:
        try:
            got = await store.get(f"{AVAILABLE_PATH}/{name}")
        except NotFound:
            continue                      # went away between children() and get()
        if got is None:
            continue
        try:
            doc = json.loads(got.value)
            out.append(BookieInfo(str(doc.get("address", name)), int(doc.get("free_bytes", 0)),
                                  bool(doc.get("read_only", False))))
        except (ValueError, TypeError, AttributeError):
            continue
    return out


def choose(candidates: Iterable[BookieInfo], count: int, rng: random.Random, *,
           exclude: Iterable[str] = ()) -> list[str]:
    """`count` distinct writable bookie addresses not in `exclude`, in random order."""
    excluded = set(exclude)
    usable = sorted({b.address for b in candidates if not b.read_only and b.address not in excluded})
    if len(usable) < count:
        raise NotEnoughBookies(f"need {count} writable bookies, have {len(usable)}",
                               available=usable, excluded=sorted(excluded))
    return rng.sample(usable, count)


def registered_addresses(candidates: Iterable[BookieInfo]) -> set[str]:
    """Addresses of the bookies that are registered (alive as far as the metadata store knows:
    a dead bookie's key vanishes once its lease expires), read-only ones included."""
    return {b.address for b in candidates}


def replace(candidates: Iterable[BookieInfo], ensemble: tuple[str, ...], indexes: Iterable[int],
            rng: random.Random, *, avoid: Iterable[str] = ()) -> tuple[str, ...]:
    """`ensemble` with a new writable bookie at each of `indexes`, chosen among `candidates` not
    in the ensemble nor in `avoid` (bookies that just failed). NotEnoughBookies if too few."""
    replaced = sorted(set(indexes))
    out = list(ensemble)
    picks = choose(candidates, len(replaced), rng, exclude=set(ensemble) | set(avoid))
    for index, address in zip(replaced, picks):
        out[index] = address
    return tuple(out)
