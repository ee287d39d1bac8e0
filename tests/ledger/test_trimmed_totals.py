"""Trimmed totals (`ManagedLedgerMetadata.trimmed`): the managed ledger's record keeps the entries,
messages and bytes of every ledger it trimmed, added in the compare-and-set that drops them, so
"ever stored" = trimmed + kept survives a trim and a reopen; a record without the field reads as
zeros. Real bookies (tests/ledger/conftest.py)."""

from __future__ import annotations

import asyncio
import json

from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import LedgerRecord, LedgerTotals, ManagedLedgerMetadata, ml_path
from tests.ledger.conftest import run, shutdown

NAME = "public/default/persistent/ml-trimmed-totals"


def _entry(i: int) -> bytes:
    return b"entry-%d-" % i + b"x" * (i % 7)


def _messages(i: int) -> int:
    return 1 + i % 3


def test_old_record_without_trimmed_reads_as_zero_and_round_trips() -> None:
    meta = ManagedLedgerMetadata((LedgerRecord(1, True, 5, 3, 30, 4), LedgerRecord(2, False, 6)), "o")
    doc = json.loads(meta.to_json())
    assert "trimmed" not in doc                                    # nothing trimmed: as before
    assert ManagedLedgerMetadata.from_json(json.dumps(doc).encode(), 1).trimmed == LedgerTotals()
    trimmed = meta.without_trimmed({1})
    assert [r.ledger_id for r in trimmed.ledgers] == [2] and trimmed.deleting == (1,)
    assert trimmed.trimmed == LedgerTotals(entries=3, messages=4, size_bytes=30)
    again = ManagedLedgerMetadata.from_json(trimmed.to_json(), 2)
    assert again.trimmed == trimmed.trimmed
    assert again.without_trimmed(set()).trimmed == trimmed.trimmed   # only grows by what leaves


def test_trimmed_totals_persist_across_trim_and_reopen(env) -> None:
    env.start_bookies(1)

    async def body() -> None:
        config = env.config(managed_ledger_rollover_entries=10, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        quorum = {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}
        ml = await ManagedLedger.open(NAME, store, client, config, **quorum)
        positions = await asyncio.gather(*(ml.append(_entry(i), messages=_messages(i)) for i in range(35)))
        ever = LedgerTotals(35, sum(_messages(i) for i in range(35)), sum(len(_entry(i)) for i in range(35)))
        assert ml.trimmed_totals == LedgerTotals()
        assert LedgerTotals.of(ml.ledgers()) == ever
        doomed = await ml.trim(positions[25])                      # the first two ledgers
        assert len(doomed) == 2
        assert ml.trimmed_totals == LedgerTotals(20, sum(_messages(i) for i in range(20)),
                                                 sum(len(_entry(i)) for i in range(20)))
        assert ml.trimmed_totals + LedgerTotals.of(ml.ledgers()) == ever
        await ml.close()
        ml2 = await ManagedLedger.open(NAME, store, client, config, **quorum)
        assert ml2.trimmed_totals + LedgerTotals.of(ml2.ledgers()) == ever
        record = ManagedLedgerMetadata.from_json((await store.get(ml_path(NAME))).value, 0)
        assert record.trimmed == ml.trimmed_totals
        await ml2.wait_trimmed(30)
        await ml2.close()
        await shutdown(store, client)
    run(body())
