"""Orphans both ways. `compare` on hand-made records and listings (every rule of chaos/orphans.py),
and `find_orphans` against real parts: a managed ledger offloaded by a real `strata bookie`
process and the cold tier to a real SeaweedFS (the session's `s3_server`), its record in a real
SQLite metadata store; then an object no record names and a record whose object is gone, both
reported.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.orphans import OrphanReport, S3Target, compare, find_orphans
from entries.entry import build_entry, parse_entry
from ledger.cold import ColdCopy
from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import LedgerRecord, ManagedLedgerMetadata
from ledger.ml_offload import BEFORE_PROPERTY
from ledger.position import Position
from offload import open_cold_storage
from offload.keys import ledger_key
from offload.tier import S3ColdStorage
from proto import pulsar_api_pb2 as pb
from tests.ledger.conftest import LedgerEnv, run, shutdown

PREFIX = "strata"
ML = "acme/orders/persistent/paid"
ML_PART = "acme/orders/persistent/fx-partition-1"
ROLL_ENTRIES = 20


def _cold(ml: str, ledger_id: int) -> ColdCopy:
    return ColdCopy(ledger_key(PREFIX, ml, ledger_id), 100, 10, 1, 1)


def test_compare_judges_every_kind_of_object():
    records = {
        ML: ManagedLedgerMetadata((LedgerRecord(3, True, 0, cold=_cold(ML, 3)), LedgerRecord(4, True, 0),
                                   LedgerRecord(5, False, 0)), deleting=(2,)),
        ML_PART: ManagedLedgerMetadata((LedgerRecord(7, True, 0, cold=_cold(ML_PART, 7)), LedgerRecord(8, True, 0)),
                                       properties={BEFORE_PROPERTY: "9:0"}),
    }
    objects = [
        ledger_key(PREFIX, ML, 3),                    # named
        ledger_key(PREFIX, ML, 2),                    # trimmed, deletion pending
        ledger_key(PREFIX, ML, 4),                    # listed, no cold, no offload request: orphan
        ledger_key(PREFIX, ML, 1),                    # no record at all: orphan
        ledger_key(PREFIX, ML_PART, 8),               # offload under way
        ledger_key(PREFIX, "acme/orders/persistent/gone", 1),   # a managed ledger with no record: orphan
        f"{PREFIX}/acme/orders/paid!iceberg/metadata/00001-x.metadata.json",
        f"{PREFIX}/_probe/0123abcd",
        "elsewhere/stray.bin",                        # nothing else belongs in the bucket
    ]
    report = compare(records, objects, [ledger_key(PREFIX, ML, 6)], PREFIX)
    assert report.orphans == sorted([ledger_key(PREFIX, ML, 4), ledger_key(PREFIX, ML, 1),
                                     ledger_key(PREFIX, "acme/orders/persistent/gone", 1), "elsewhere/stray.bin"])
    assert report.missing == [(ML_PART, 7, ledger_key(PREFIX, ML_PART, 7))]
    assert sorted(report.pending) == sorted([(ledger_key(PREFIX, ML, 2), "trimmed: deletion pending"),
                                             (ledger_key(PREFIX, ML_PART, 8), "offload under way"),
                                             (ledger_key(PREFIX, ML, 6), "incomplete multipart upload")])
    assert len(report.ignored) == 2
    assert compare(records, [ledger_key(PREFIX, ML, 3), ledger_key(PREFIX, ML_PART, 7)], [], PREFIX) == OrphanReport()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LedgerEnv]:
    """Bookie processes and a SQLite metadata store, as tests/ledger/conftest.py's `env`."""
    e = LedgerEnv(tmp_path, f"sqlite:///{tmp_path}/meta.db", tmp_path / "bookie.toml")
    e.set_bookie_config(metadata_session_lease_ms=10_000)
    try:
        yield e
    finally:
        for bookie in e.bookies:
            bookie.close()


def _entry(i: int) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1_700_000_000_000 + i)
    return build_entry(md, random.Random(i).randbytes(200))


def _meta_hook(data: bytes) -> tuple[int, int]:
    info = parse_entry(data)
    return info.num_messages, info.publish_time_ms


async def _offload_two_ledgers(env: LedgerEnv, s3_server: Any, bucket: str) -> list[str]:
    """A managed ledger with three ledgers, the first two offloaded; their object keys."""
    config = env.config(managed_ledger_rollover_entries=ROLL_ENTRIES, managed_ledger_rollover_min_age_ms=0,
                        offload_driver="s3", offload_s3_endpoint=s3_server.endpoint,
                        offload_s3_region=s3_server.region, offload_s3_bucket=bucket, offload_s3_prefix=PREFIX,
                        offload_row_group_bytes=64 * 1024, offload_s3_connect_timeout_ms=1_000,
                        offload_s3_read_timeout_ms=5_000, metadata_session_lease_ms=10_000)
    store, client = await env.open(config)
    cold = open_cold_storage(config, access_key=s3_server.access_key, secret_key=s3_server.secret_key)
    assert isinstance(cold, S3ColdStorage)
    ml = await ManagedLedger.open(ML, store, client, config, ensemble_size=1, write_quorum=1, ack_quorum=1,
                                  meta_from_entry=_meta_hook, cold=cold)
    await asyncio.gather(*(ml.append(_entry(i), publish_time_ms=1_700_000_000_000 + i)
                           for i in range(2 * ROLL_ENTRIES + 5)))
    ids = [info.ledger_id for info in ml.ledgers()]
    assert len(ids) == 3
    await ml.start_offload(Position(ids[2], 0))
    await ml.close()
    await cold.close()
    await shutdown(store, client)
    return [ledger_key(PREFIX, ML, ledger_id) for ledger_id in ids[:2]]


def test_find_orphans_on_a_real_store_and_bucket_reports_both_ways(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    offloaded = run(_offload_two_ledgers(env, s3_server, bucket))
    target = S3Target(s3_server.endpoint, bucket, PREFIX, s3_server.access_key, s3_server.secret_key,
                      s3_server.region)
    clean = find_orphans(env.metadata_url, target)
    assert (clean.orphans, clean.missing, clean.pending) == ([], [], [])

    client = s3_server.boto3_client()
    stray = ledger_key(PREFIX, ML, 999)                              # an object no record names
    client.put_object(Bucket=bucket, Key=stray, Body=b"not a ledger")
    client.delete_object(Bucket=bucket, Key=offloaded[0])            # a record naming a gone object
    report = find_orphans(env.metadata_url, target)
    assert report.orphans == [stray]
    assert [(name, key) for name, _, key in report.missing] == [(ML, offloaded[0])]
