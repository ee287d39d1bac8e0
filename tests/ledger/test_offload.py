"""The managed ledger's offload on real parts: `strata bookie` processes and a SQLite metadata
store (tests/ledger/conftest.py), and the cold tier `offload.tier.S3ColdStorage` over a real
SeaweedFS speaking S3 with SigV4 (the session's `s3_server`, which the S3-down test stops and
starts again).

Covered: a prefix offload copies exactly the closed, not yet offloaded ledgers before the
position (never the open one) and records them; reads across the bookie/cold boundary are
byte-identical; after the deletion lag the bookie copy is gone (bookie ListLedgers, ledger
metadata) and reads come from S3, also after reopening and with the index blob lost; a second
offload while one runs is OffloadInProgress; an offload interrupted by close() is resumed by the
next open; trimming offloaded ledgers deletes their objects, deleting the managed ledger all of
them; S3 down gives status ERROR with the ledger still on the bookies, reads fall back to the
bookies (or wait, once the bookie copy is gone), and a later offload succeeds; maybe_offload's
byte and age thresholds (0 = ASAP, -1 off); ledger-closed listeners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from common.errors import ColdTierError, ColdTierUnavailable, OffloadInProgress, OffloadNotConfigured
from entries.entry import build_entry, parse_entry
from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import LedgerRecord, ManagedLedgerMetadata, index_path, ml_path
from ledger.ml_offload import BEFORE_PROPERTY, NO_POSITION, first_unoffloaded, prefix_candidates, threshold_before
from ledger.position import EARLIEST, Position
from ledger.types import LedgerState
from offload import open_cold_storage
from offload.keys import ledger_key
from offload.tier import S3ColdStorage
from proto import pulsar_api_pb2 as pb
from tests.ledger.conftest import run, shutdown
from tests.support.waiting import until

NAME = "acme/offload/persistent/ml-offload"
ROLL_ENTRIES = 50
LEDGERS = 12                              # closed ledgers of the interrupted offload
PUBLISH_BASE_MS = 1_700_000_000_000


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    region: str
    seaweed: Any                          # the session's server (tests/support/seaweed.TestSeaweed)

    def client(self) -> Any:
        return self.seaweed.boto3_client()

    def new_bucket(self) -> str:
        return self.seaweed.new_bucket()

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket, Prefix="strata/")
        return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.fixture
def s3(s3_server: Any) -> Iterator[S3Server]:
    """The session's SeaweedFS; a test that stops it gets it running again afterwards."""
    yield S3Server(s3_server.endpoint, s3_server.access_key, s3_server.secret_key, s3_server.region, s3_server)
    if not s3_server.running:
        s3_server.start()


def _start_bookie(env: Any) -> None:
    # a lease that survives a loaded machine: SeaweedFS and the bookie share two cores here
    env.set_bookie_config(metadata_session_lease_ms=10_000)
    env.start_bookies(1)


def _config(env: Any, server: S3Server, bucket: str, **overrides: Any):
    values: dict[str, Any] = dict(
        managed_ledger_rollover_entries=ROLL_ENTRIES, managed_ledger_rollover_min_age_ms=0,
        offload_driver="s3", offload_s3_endpoint=server.endpoint, offload_s3_region=server.region,
        offload_s3_bucket=bucket, offload_s3_prefix="strata", offload_row_group_bytes=64 * 1024,
        offload_s3_connect_timeout_ms=1_000, offload_s3_read_timeout_ms=5_000,
        offload_retry_backoff_max_ms=100, offload_attempts_max=2, metadata_session_lease_ms=10_000)
    values.update(overrides)
    return env.config(**values)


def _cold(server: S3Server, config: Any) -> S3ColdStorage:
    storage = open_cold_storage(config, access_key=server.access_key, secret_key=server.secret_key)
    assert isinstance(storage, S3ColdStorage)
    return storage


def _entry(i: int) -> bytes:
    """A stored Pulsar entry (the cold tier parses them): a single message of about 1 KiB."""
    payload = random.Random(i).randbytes(700) + b"m" * 300
    md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=PUBLISH_BASE_MS + i)
    return build_entry(md, payload)


def _meta_hook(data: bytes) -> tuple[int, int]:
    info = parse_entry(data)
    return info.num_messages, info.publish_time_ms


async def _open(name: str, store: Any, client: Any, config: Any, cold: Any) -> ManagedLedger:
    return await ManagedLedger.open(name, store, client, config, ensemble_size=1, write_quorum=1, ack_quorum=1,
                                    meta_from_entry=_meta_hook, cold=cold)


async def _append(ml: ManagedLedger, first: int, count: int) -> list[Position]:
    return list(await asyncio.gather(*(ml.append(_entry(i), publish_time_ms=PUBLISH_BASE_MS + i)
                                       for i in range(first, first + count))))


async def _record(store: Any, name: str = NAME) -> ManagedLedgerMetadata:
    got = await store.get(ml_path(name))
    return ManagedLedgerMetadata.from_json(got.value, got.version)


async def _read_all(ml: ManagedLedger, client: Any) -> list[bytes]:
    client.entry_cache.invalidate_owner(ml.name)            # from the bookies / S3, not the cache
    return [e.data for e in await ml.read(EARLIEST, 10_000)]


def test_threshold_and_prefix_choices_follow_pulsar():
    """maybeOffload's walk, with pulsar-admin's test vectors (ledgers of 1000, 2000, 3000 bytes)."""
    sealed_ms = 1_000_000
    records = [LedgerRecord(i, True, 0, 10, size, 10, closed_ms=sealed_ms) for i, size in
               ((1, 1000), (2, 2000), (3, 3000))] + [LedgerRecord(4, False, 0)]
    assert threshold_before(records, 2**62, -1, sealed_ms) is None
    assert threshold_before(records, 0, -1, sealed_ms) == Position(4, 0)        # ASAP: all closed
    assert threshold_before(records, 1000, -1, sealed_ms) == Position(4, 0)
    assert threshold_before(records, 5000, -1, sealed_ms) == Position(2, 0)     # 3+2 = 5000 is not > 5000
    assert threshold_before(records, -1, -1, sealed_ms + 10**9) is None         # both off
    assert threshold_before(records, -1, 60, sealed_ms + 59_999) is None
    assert threshold_before(records, -1, 60, sealed_ms + 60_000) == Position(4, 0)
    assert threshold_before(records[:3] + [LedgerRecord(4, True, 0)], 0, -1, 0) == Position(4, 0)  # empty: skipped
    assert [r.ledger_id for r in prefix_candidates(records, 3)] == [1, 2]
    assert [r.ledger_id for r in prefix_candidates(records, 99)] == [1, 2, 3]    # never the open one
    assert first_unoffloaded(records, 3) == Position(3, 0) and first_unoffloaded(records, 99) == Position(99, 0)


def test_offload_prefix_records_the_right_ledgers_and_reads_cross_the_boundary(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        closed: list[int] = []
        ml.add_ledger_closed_listener(closed.append)
        positions = await _append(ml, 0, 5 * ROLL_ENTRIES + 10)
        ids = [info.ledger_id for info in ml.ledgers()]
        assert len(ids) == 6 and closed == ids[:5]
        assert ml.offload_status.status == "NOT_RUN" and ml.offload_status.first_unoffloaded == NO_POSITION

        task = ml.start_offload(Position(ids[3], 7))
        with pytest.raises(OffloadInProgress):               # 409 while one runs
            ml.start_offload(Position(ids[5], 0))
        assert ml.maybe_offload(0, -1, 0) is None
        assert await task == Position(ids[3], 0)
        status = ml.offload_status
        assert (status.status, status.last_error, status.first_unoffloaded) == ("SUCCESS", "", Position(ids[3], 0))
        assert status.last_offload_ledger_id == ids[2] and status.last_success_ms > 0
        assert status.entries_done == status.entries_total == 3 * ROLL_ENTRIES
        assert [i.state for i in ml.ledgers()] == [LedgerState.OFFLOADED] * 3 + [LedgerState.CLOSED] * 2 + [
            LedgerState.OPEN]
        record = await _record(store)
        assert [r.cold is not None for r in record.ledgers] == [True] * 3 + [False] * 3
        assert BEFORE_PROPERTY not in record.properties
        assert all(r.cold.entries == ROLL_ENTRIES for r in record.ledgers[:3] if r.cold is not None)
        assert s3.keys(bucket) == sorted(r.cold.key for r in record.ledgers[:3] if r.cold is not None)
        infos = ml.ledgers()
        assert ml.offloaded_size_bytes == sum(i.size_bytes for i in infos[:3])

        expected = [_entry(i) for i in range(len(positions))]
        assert await _read_all(ml, client) == expected        # S3 for 0..2, bookies for 3..5
        client.entry_cache.invalidate_owner(ml.name)
        across = await ml.read(positions[3 * ROLL_ENTRIES - 5], 10)
        assert [e.position for e in across] == positions[3 * ROLL_ENTRIES - 5: 3 * ROLL_ENTRIES + 5]
        assert [e.data for e in across] == expected[3 * ROLL_ENTRIES - 5: 3 * ROLL_ENTRIES + 5]

        # up to the open ledger: the two closed ones left; the open one never
        assert await ml.start_offload(Position(ids[5], 0)) == Position(ids[5], 0)
        assert [i.state for i in ml.ledgers()] == [LedgerState.OFFLOADED] * 5 + [LedgerState.OPEN]
        assert len(s3.keys(bucket)) == 5
        # nothing left before it: success at once, nothing uploaded
        assert await ml.start_offload(Position(ids[5], 0)) == Position(ids[5], 0)
        assert ml.offload_status.entries_total == 0
        await ml.close()

        plain = await _open(NAME + "-no-cold", store, client, config, None)
        with pytest.raises(OffloadNotConfigured):
            plain.start_offload(Position(10**9, 0))
        assert plain.maybe_offload(0, 0, 0) is None
        await plain.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_after_the_deletion_lag_reads_come_from_s3_also_after_reopening(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        await _append(ml, 0, 3 * ROLL_ENTRIES + 5)
        ids = [info.ledger_id for info in ml.ledgers()]
        await ml.start_offload(Position(ids[-1], 0))
        now_ms = max(r.cold.completed_ms for r in (await _record(store)).ledgers if r.cold is not None)
        assert await ml.delete_offloaded_from_bookies(-1, now_ms + 10**9) == []        # -1: never
        assert await ml.delete_offloaded_from_bookies(60_000, now_ms) == []            # lag not passed
        assert await ml.delete_offloaded_from_bookies(0, now_ms) == ids[:3]
        assert await ml.delete_offloaded_from_bookies(0, now_ms) == []                  # done once
        await ml.wait_trimmed(30)
        bookie = client.pool.get(env.bookies[0].address)
        on_bookie = {s.ledger_id for s in await bookie.list_ledgers()}
        assert on_bookie.isdisjoint(ids[:3]) and ids[3] in on_bookie
        assert all([await client.ledger_metadata(i) is None for i in ids[:3]])
        record = await _record(store)
        assert [r.bookie_deleted for r in record.ledgers] == [True, True, True, False]
        assert all([await store.get(index_path(NAME, i)) is not None for i in ids[:3]])   # the index stays
        expected = [_entry(i) for i in range(3 * ROLL_ENTRIES + 5)]
        assert await _read_all(ml, client) == expected
        infos_before = ml.ledgers()
        await ml.close()

        # reopen (a new owner): the ledgers are still listed, read from S3; one index blob lost
        # on the way is rebuilt from the cold copy, never from the bookies (the ledger is gone there)
        await store.delete(index_path(NAME, ids[1]))
        ml = await _open(NAME, store, client, config, cold)
        infos = ml.ledgers()
        assert infos[:3] == infos_before[:3] and infos[3].entries == infos_before[3].entries
        assert [i.state for i in infos[:3]] == [LedgerState.OFFLOADED] * 3
        assert await _read_all(ml, client) == expected
        assert ml.entry_meta(Position(ids[1], 7)).publish_time_ms == PUBLISH_BASE_MS + ROLL_ENTRIES + 7
        await ml.start_offload(Position(ml.ledgers()[-1].ledger_id, 0))      # ledger 3 too
        await ml.close()

        # a crash between marking ledger 3's bookie copy deleted and deleting it: the next open
        # finishes the deletion
        assert await client.ledger_metadata(ids[3]) is not None
        got = await store.get(ml_path(NAME))
        meta = ManagedLedgerMetadata.from_json(got.value, got.version)
        marked = [dataclasses.replace(r, bookie_deleted=True) if r.ledger_id == ids[3] else r for r in meta.ledgers]
        await store.put(ml_path(NAME), meta.with_ledgers(marked).to_json(), expected_version=got.version)
        ml = await _open(NAME, store, client, config, cold)

        async def gone() -> bool:
            return await client.ledger_metadata(ids[3]) is None
        await until(gone, 30, what="the marked bookie copy deleted")
        assert await _read_all(ml, client) == expected
        await ml.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_an_offload_interrupted_by_close_is_resumed_by_the_next_open(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        await _append(ml, 0, LEDGERS * ROLL_ENTRIES + 3)
        ids = [info.ledger_id for info in ml.ledgers()]
        ml.start_offload(Position(ids[-1], 0))

        async def requested() -> bool:
            return BEFORE_PROPERTY in (await _record(store)).properties
        await until(requested, 60, what="the offload request recorded", interval_s=0.01)
        await ml.close()                  # as an unload mid-offload; a crash leaves the same record
        record = await _record(store)
        assert record.properties[BEFORE_PROPERTY] == f"{ids[-1]}:0"
        assert sum(r.cold is not None for r in record.ledgers) < LEDGERS

        ml = await _open(NAME, store, client, config, cold)      # resumes it in the background
        assert ml.offload_status.status == "RUNNING"
        await until(lambda: ml.offload_status.status != "RUNNING", 120, what="the resumed offload")
        assert ml.offload_status.status == "SUCCESS"
        record = await _record(store)
        assert BEFORE_PROPERTY not in record.properties
        assert [r.cold is not None for r in record.ledgers] == [True] * LEDGERS + [False] * 2
        assert len(s3.keys(bucket)) == LEDGERS
        assert await _read_all(ml, client) == [_entry(i) for i in range(LEDGERS * ROLL_ENTRIES + 3)]
        await ml.close()

        # a crashed broker's record, written as it would have left it: resumed on open too (the
        # last ledger, sealed empty by close(), has nothing to offload)
        got = await store.get(ml_path(NAME))
        meta = ManagedLedgerMetadata.from_json(got.value, got.version)
        last = meta.ledgers[-1].ledger_id
        await store.put(ml_path(NAME), meta.with_properties({BEFORE_PROPERTY: f"{last + 1}:0"}).to_json(),
                        expected_version=got.version)
        ml = await _open(NAME, store, client, config, cold)
        await until(lambda: ml.offload_status.status != "RUNNING", 120, what="the resumed offload")
        assert ml.offload_status.status == "SUCCESS"
        record = await _record(store)
        assert BEFORE_PROPERTY not in record.properties
        assert [r.cold is not None for r in record.ledgers] == [True] * (LEDGERS + 1) + [False, False]
        await ml.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_trimming_offloaded_ledgers_deletes_their_objects_and_delete_takes_all(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        await _append(ml, 0, 4 * ROLL_ENTRIES + 1)
        ids = [info.ledger_id for info in ml.ledgers()]
        await ml.start_offload(Position(ids[-1], 0))
        keys = {r.ledger_id: r.cold.key for r in (await _record(store)).ledgers if r.cold is not None}
        assert sorted(s3.keys(bucket)) == sorted(keys.values())
        await ml.delete_offloaded_from_bookies(0, 2**62)            # ledger 0 and 1: S3 only as well
        assert await ml.trim(Position(ids[2], 0)) == ids[:2]
        await ml.wait_trimmed(30)
        await ml.wait_offload_idle(30)
        assert s3.keys(bucket) == sorted([keys[ids[2]], keys[ids[3]]])
        assert [i.ledger_id for i in ml.ledgers()] == ids[2:]
        assert await _read_all(ml, client) == [_entry(i) for i in range(2 * ROLL_ENTRIES, 4 * ROLL_ENTRIES + 1)]
        await ml.close()

        # objects an owner left behind (a trim whose object delete never ran): the next open
        # removes those of ledgers it does not keep, never one newer than every ledger it knows
        stray_old, stray_new = (ledger_key("strata", NAME, lid) for lid in (ids[0] - 1, 10**12))
        for key in (stray_old, stray_new):
            s3.client().put_object(Bucket=bucket, Key=key, Body=b"not parquet")
        ml = await _open(NAME, store, client, config, cold)
        await ml.wait_offload_idle(30)
        assert stray_old not in s3.keys(bucket) and stray_new in s3.keys(bucket)
        await ml.delete()
        assert s3.keys(bucket) == []
        assert await store.get(ml_path(NAME)) is None
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_s3_down_sets_error_keeps_the_bookie_copy_and_a_later_offload_succeeds(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        await _append(ml, 0, 3 * ROLL_ENTRIES + 1)
        ids = [info.ledger_id for info in ml.ledgers()]
        expected = [_entry(i) for i in range(3 * ROLL_ENTRIES + 1)]
        await ml.start_offload(Position(ids[1], 0))              # ledger 0 offloaded while S3 is up
        bk_config = _config(env, s3, bucket, offload_read_priority="bookkeeper-first")
        bk_first = await _open(NAME + "-bk", store, client, bk_config, cold)
        await _append(bk_first, 0, ROLL_ENTRIES + 1)
        await bk_first.start_offload(Position(bk_first.ledgers()[-1].ledger_id, 0))

        await asyncio.to_thread(s3.seaweed.stop)
        with pytest.raises(ColdTierError):
            await ml.start_offload(Position(ids[-1], 0))
        status = ml.offload_status
        assert status.status == "ERROR" and status.last_error and status.first_unoffloaded == NO_POSITION
        assert status.last_failure_ms > 0 and status.last_offload_ledger_id == ids[0]
        assert [i.state for i in ml.ledgers()] == [LedgerState.OFFLOADED, LedgerState.CLOSED, LedgerState.CLOSED,
                                                   LedgerState.OPEN]
        assert [r.cold is not None for r in (await _record(store)).ledgers] == [True, False, False, False]
        # tiered-storage-first with S3 down: the offloaded ledger is read from its bookie copy
        assert await _read_all(ml, client) == expected and ml._offloader.cold_read_fallbacks > 0
        # bookkeeper-first: from the bookies, S3 not even asked
        assert await _read_all(bk_first, client) == expected[:ROLL_ENTRIES + 1]
        assert bk_first._offloader.cold_read_fallbacks == 0
        await bk_first.close()
        # with the bookie copy gone, a read waits for S3 (a retriable error), and nothing is skipped
        assert await ml.delete_offloaded_from_bookies(0, 2**62) == [ids[0]]
        client.entry_cache.invalidate_owner(ml.name)
        with pytest.raises(ColdTierUnavailable):
            await ml.read(EARLIEST, 10)

        await asyncio.to_thread(s3.seaweed.start)
        assert await ml.start_offload(Position(ids[-1], 0)) == Position(ids[-1], 0)
        assert ml.offload_status.status == "SUCCESS" and ml.offload_status.last_error == ""
        assert [i.state for i in ml.ledgers()] == [LedgerState.OFFLOADED] * 3 + [LedgerState.OPEN]
        assert await _read_all(ml, client) == expected
        await ml.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_maybe_offload_thresholds_and_never_the_open_ledger(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        await _append(ml, 0, 5 * ROLL_ENTRIES + 2)
        infos = ml.ledgers()
        ids = [i.ledger_id for i in infos]
        now_ms = max(r.sealed_ms for r in (await _record(store)).ledgers)

        def offloaded() -> list[int]:
            return [i.ledger_id for i in ml.ledgers() if i.state is LedgerState.OFFLOADED]

        assert ml.maybe_offload(-1, -1, now_ms) is None                 # both off
        assert ml.maybe_offload(-1, 3600, now_ms) is None               # nothing that old
        assert ml.maybe_offload(10**12, -1, now_ms) is None             # nothing that big
        # newest -> oldest: ledgers 4, 3 sum to at most the threshold; 2 passes it, so 0..2 go
        threshold = infos[4].size_bytes + infos[3].size_bytes
        task = ml.maybe_offload(threshold, -1, now_ms)
        assert task is not None and await task == Position(ids[3], 0)
        assert offloaded() == ids[:3]
        assert ml.maybe_offload(threshold, -1, now_ms) is None          # done: nothing new is due
        # by age: everything sealed an hour before "now"
        task = ml.maybe_offload(-1, 3600, now_ms + 3_600_000)
        assert task is not None and await task == Position(ids[5], 0)
        assert offloaded() == ids[:5]
        # 0 = as soon as possible, but never the open ledger, even with both at 0
        assert ml.maybe_offload(0, 0, now_ms + 10**9) is None
        await _append(ml, 5 * ROLL_ENTRIES + 2, ROLL_ENTRIES)              # seals ledger 5
        task = ml.maybe_offload(0, -1, now_ms)
        assert task is not None and await task == Position(ml.ledgers()[-1].ledger_id, 0)
        assert offloaded() == [i.ledger_id for i in ml.ledgers()[:-1]]
        assert ml.ledgers()[-1].state is LedgerState.OPEN
        await ml.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_a_ledger_trimmed_while_it_uploads_is_skipped_and_leaves_no_object(env, s3):
    _start_bookie(env)
    bucket = s3.new_bucket()
    big = 2_000                               # about 2 MiB: progress is reported every MiB

    async def body():
        config = _config(env, s3, bucket, managed_ledger_rollover_entries=big)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        await _append(ml, 0, big + 1)
        first, current = (i.ledger_id for i in ml.ledgers())
        task = ml.start_offload(Position(current, 0))
        await until(lambda: ml.offload_status.entries_done > 0, 60, what="the upload under way", interval_s=0.005)
        assert await ml.trim(Position(current, 0)) == [first]
        assert await task == Position(current, 0)            # trimmed meanwhile: skipped, not an error
        assert ml.offload_status.status == "SUCCESS" and ml.offload_status.last_error == ""
        await ml.wait_trimmed(30)
        await ml.wait_offload_idle(30)
        assert s3.keys(bucket) == []
        assert s3.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        assert [r.ledger_id for r in (await _record(store)).ledgers] == [current]
        await ml.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_offload_asap_from_the_closed_listener_while_appends_roll_ledgers(env, s3):
    """As the broker wires it: every sealed ledger triggers maybe_offload(0, -1); appends and
    rollovers go on meanwhile, sharing the record's compare-and-set with the offload."""
    _start_bookie(env)
    bucket = s3.new_bucket()

    async def body():
        config = _config(env, s3, bucket, managed_ledger_rollover_entries=20)
        store, client = await env.open(config)
        cold = _cold(s3, config)
        ml = await _open(NAME, store, client, config, cold)
        triggered: list[asyncio.Task] = []

        def on_closed(ledger_id: int) -> None:
            task = ml.maybe_offload(0, -1, 0)
            if task is not None:
                triggered.append(task)
        ml.add_ledger_closed_listener(on_closed)
        total = 0
        for _ in range(10):                                  # bursts, each rolling a few ledgers
            await _append(ml, total, 45)
            total += 45
            await asyncio.sleep(0.02)
        assert triggered
        await asyncio.gather(*triggered, return_exceptions=True)
        # the last ledgers sealed while an offload ran: a final pass (as the retention task does)
        last = ml.maybe_offload(0, -1, 0)
        if last is not None:
            await last
        assert ml.state.value == "ready" and ml.offload_status.status == "SUCCESS"
        infos = ml.ledgers()
        assert [i.state for i in infos] == [LedgerState.OFFLOADED] * (len(infos) - 1) + [LedgerState.OPEN]
        record = await _record(store)
        assert len(s3.keys(bucket)) == len(infos) - 1 == sum(r.cold is not None for r in record.ledgers)
        assert await _read_all(ml, client) == [_entry(i) for i in range(total)]
        await ml.close()
        await cold.close()
        await shutdown(store, client)
    run(body())


def test_offloaded_objects_carry_each_messages_kafka_offset(env, s3, seed):
    """Every row of an offloaded object has `offset` = its entry's offset (`offset_of`) + its
    batch index: batches of random sizes over several ledgers, after a trim moved the first
    offset away from 0. Seeded."""
    import io

    import pyarrow.parquet as pq

    from entries import batch as eb

    _start_bookie(env)
    bucket = s3.new_bucket()
    rng = random.Random(seed)

    def batch(i: int, n: int) -> bytes:
        md, payload = eb.build_batch([eb.BatchMessage(payload=b"m%d-%d" % (i, k)) for k in range(n)],
                                     producer_name="p", sequence_id=i, publish_time_ms=PUBLISH_BASE_MS + i)
        return build_entry(md, payload)

    async def body():
        config = _config(env, s3, bucket, managed_ledger_rollover_entries=20)
        store, client = await env.open(config)
        ml = await _open(NAME, store, client, config, _cold(s3, config))
        sizes = [rng.randrange(1, 12) for _ in range(75)]
        positions = list(await asyncio.gather(*(ml.append(batch(i, n), messages=n, publish_time_ms=PUBLISH_BASE_MS + i)
                                                for i, n in enumerate(sizes))))
        await ml.trim(positions[25])                                     # the first ledger goes
        ids = [info.ledger_id for info in ml.ledgers()]
        assert ml.log_start_offset > 0
        await ml.start_offload(Position(ids[-1], 0))
        record = await _record(store)
        offloaded = [r for r in record.ledgers if r.cold is not None]
        assert len(offloaded) >= 2
        for r in offloaded:
            body_bytes = s3.client().get_object(Bucket=bucket, Key=r.cold.key)["Body"].read()
            table = pq.read_table(io.BytesIO(body_bytes), columns=["entry_id", "batch_index", "offset"])
            assert table.column("offset").null_count == 0
            want = [ml.offset_of(Position(r.ledger_id, e)) + max(b, 0)
                    for e, b in zip(table.column("entry_id").to_pylist(), table.column("batch_index").to_pylist(),
                                    strict=True)]
            assert table.column("offset").to_pylist() == want
            assert want[0] == r.first_offset and len(want) == r.messages
        kept = [batch(i, n) for i, n in enumerate(sizes) if positions[i].ledger_id in ids]
        assert await _read_all(ml, client) == kept
        await ml.close()
        await shutdown(store, client)
    run(body())
