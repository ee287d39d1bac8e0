"""Plain values a bookie reports, shared by the bookie server and its client.

These carry no behaviour; they exist so the ledger layer can use `BookieClient` without
importing the storage engine, and so the server and client agree on what a field means.
"""

from __future__ import annotations

from dataclasses import dataclass

# Entry ids and LACs are non-negative; -1 means "none yet" everywhere in the bookie.
NO_ENTRY = -1


@dataclass(frozen=True)
class LedgerSummary:
    """One ledger as a bookie sees it."""

    ledger_id: int
    # Highest entry id stored on this bookie (-1 = none).
    last_entry_id: int
    # Highest LAC piggybacked on any add this bookie stored (-1 = none).
    last_add_confirmed: int
    fenced: bool
    # Payload bytes of this ledger's live entries on this bookie (headers not counted).
    payload_bytes: int


@dataclass(frozen=True)
class BookieInfo:
    """What GetInfo reports."""

    # Bytes of all the bookie's files on disk (segments, index files, checkpoint).
    disk_used_bytes: int
    # Free bytes on the file system holding the data directory.
    disk_free_bytes: int
    ledger_count: int
    read_only: bool
    bookie_id: str
    # TCP port of its framed data path (bookie/data_server.py), same host; 0 = none.
    data_port: int = 0
