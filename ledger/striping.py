"""Striping and quorum arithmetic: which bookies hold an entry, and when enough have answered.

Entry `e` of an ensemble of E bookies goes to the Qw bookies at ensemble indexes
`e mod E, e+1 mod E, ..., e+Qw-1 mod E` (its *write set*), and is acknowledged once Qa of them
hold it durably. Pure functions over ints, so the rules are unit-tested without any bookie.

Recovery rules (BookKeeper's):
- Fencing / reading the LAC needs *ack-quorum coverage*: in every write set at least
  `Qw - Qa + 1` bookies answered. Then no set of Qa bookies that could have acknowledged an entry
  lies entirely among the bookies that did not answer, so every acknowledged entry is visible.
- A recovery read may declare entry `e` absent (never acknowledged) once `Qw - Qa + 1` bookies of
  its write set say they do not have it: at most `Qa - 1` could then hold it.
"""

from __future__ import annotations

from common.invariant import invariant


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indexes of the bookies entry `entry_id` is written to, in preference order."""
    invariant(entry_id >= 0 and ensemble_size >= write_quorum >= 1, "valid striping args",
              entry=entry_id, E=ensemble_size, Qw=write_quorum)
    start = entry_id % ensemble_size
    return [(start + i) % ensemble_size for i in range(write_quorum)]


def holds(bookie_index: int, entry_id: int, ensemble_size: int, write_quorum: int) -> bool:
    """Whether the bookie at `bookie_index` is in the write set of `entry_id`."""
    return (bookie_index - entry_id) % ensemble_size < write_quorum


def read_chunks(first: int, last: int, ensemble_size: int, write_quorum: int) -> list[tuple[int, int, int]]:
    """Split entries first..last into `(bookie_index, first, last)` runs, each held whole by that
    bookie, so a range is read with few requests spread over the ensemble.

    Entries e..e+Qw-1 all live on bookie (e+Qw-1) mod E; with Qw == E every bookie holds all, and
    one run covers the whole range (rotating the bookie by the first entry spreads readers).
    """
    if last < first:
        return []
    if write_quorum == ensemble_size:
        return [(first % ensemble_size, first, last)]
    out = []
    e = first
    while e <= last:
        end = min(last, e + write_quorum - 1)
        out.append(((e + write_quorum - 1) % ensemble_size, e, end))
        e = end + 1
    return out


def coverage_met(responded: set[int], ensemble_size: int, write_quorum: int, ack_quorum: int) -> bool:
    """Ack-quorum coverage: every write set has at least Qw - Qa + 1 responders."""
    need = write_quorum - ack_quorum + 1
    for start in range(ensemble_size):
        members = write_set(start, ensemble_size, write_quorum)
        if sum(1 for m in members if m in responded) < need:
            return False
    return True


def absent_decided(missing: int, write_quorum: int, ack_quorum: int) -> bool:
    """Enough bookies of the write set lack the entry that it can never have been acknowledged."""
    return missing >= write_quorum - ack_quorum + 1
