"""Terminating a managed ledger (Pulsar's asyncTerminate), on real bookie processes
(tests/ledger/conftest.py).

- `terminate()` seals the open ledger after the appends in flight completed and returns the last
  confirmed position; every later append raises TopicTerminated (retriable=False, Pulsar's
  TopicTerminatedError); terminating again returns the same position.
- The record keeps `terminated`: a reopen (another owner, after a restart) is terminated at the
  same position, creates no new ledger and still refuses appends; reads go on.
- A record written before the field existed reads as not terminated; the field round-trips.
- An empty managed ledger terminates at `(first ledger, -1)`.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from common.errors import PulsarServerError, TopicTerminated
from ledger.managed_ledger import ManagedLedger, MLState
from ledger.ml_metadata import LedgerRecord, ManagedLedgerMetadata, ml_path
from ledger.position import Position
from tests.ledger.conftest import run, shutdown

QUORUM = {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}


def test_record_without_terminated_reads_as_open_and_the_field_round_trips() -> None:
    meta = ManagedLedgerMetadata((LedgerRecord(1, True, 5, 3, 30, 4),), "o")
    doc = json.loads(meta.to_json())
    assert "terminated" not in doc                                 # as records were before
    assert ManagedLedgerMetadata.from_json(json.dumps(doc).encode(), 1).terminated is None
    done = meta.with_terminated(Position(1, 2))
    again = ManagedLedgerMetadata.from_json(done.to_json(), 2)
    assert again.terminated == Position(1, 2)
    assert again.with_owner("p").terminated == Position(1, 2)     # a new owner keeps it
    assert TopicTerminated.server_error == PulsarServerError.TopicTerminatedError == 15
    assert not TopicTerminated.retriable


def test_terminate_seals_refuses_appends_and_survives_reopen(env) -> None:
    env.start_bookies(1)
    name = "public/default/persistent/ml-terminate"

    async def body() -> None:
        config = env.config(managed_ledger_rollover_entries=7, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(name, store, client, config, **QUORUM)
        in_flight = [ml.append_future(b"m-%d" % i) for i in range(20)]   # across rollovers
        last = await ml.terminate()
        positions = await asyncio.gather(*in_flight)      # accepted before: all stored
        assert last == positions[-1] == ml.last_confirmed
        assert ml.state is MLState.TERMINATED and ml.terminated_position == last
        assert all(info.state.value != "open" for info in ml.ledgers())
        with pytest.raises(TopicTerminated):
            await ml.append(b"late")
        assert await ml.terminate() == last               # twice: the same position
        entries = await ml.read(ml.first_position, 100)
        assert [e.data for e in entries] == [b"m-%d" % i for i in range(20)]
        ledgers_before = [i.ledger_id for i in ml.ledgers()]

        # another owner (a restart, a takeover): terminated at the same place, no new ledger
        ml2 = await ManagedLedger.open(name, store, client, config, **QUORUM)
        assert ml2.state is MLState.TERMINATED and ml2.terminated_position == last
        assert [i.ledger_id for i in ml2.ledgers()] == ledgers_before
        assert ml2.last_confirmed == last
        with pytest.raises(TopicTerminated):
            ml2.append_future(b"after restart")
        assert await ml2.terminate() == last
        assert len(await ml2.read(ml2.first_position, 100)) == 20
        record = ManagedLedgerMetadata.from_json((await store.get(ml_path(name))).value, 0)
        assert record.terminated == last and all(r.closed for r in record.ledgers)
        await ml2.close()
        await ml.close()
        await shutdown(store, client)

    run(body())


def test_terminate_an_empty_managed_ledger(env) -> None:
    env.start_bookies(1)
    name = "public/default/persistent/ml-terminate-empty"

    async def body() -> None:
        config = env.config()
        store, client = await env.open(config)
        ml = await ManagedLedger.open(name, store, client, config, **QUORUM)
        first_ledger = ml.ledgers()[0].ledger_id
        last = await ml.terminate()
        assert last == Position(first_ledger, -1)
        with pytest.raises(TopicTerminated):
            ml.append_future(b"x")
        await ml.close()
        ml2 = await ManagedLedger.open(name, store, client, config, **QUORUM)
        assert ml2.terminated_position == last and ml2.state is MLState.TERMINATED
        await ml2.close()
        await shutdown(store, client)

    run(body())
