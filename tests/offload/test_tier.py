"""S3ColdStorage against a real SeaweedFS over HTTP with SigV4 credentials (the run's `s3_server`,
a bucket per test), offloading real
ledgers written to a real bookie process (tests/ledger/conftest.py's `env`).

Covered: byte-identical read-back across row groups and parts, with read-ahead and shared
fetches; idempotent re-offload; a bookie failure, a cancellation or a kill -9 of the uploading
process mid-upload leaves nothing visible, and the next attempt aborts the stale multipart upload
and completes; S3 stopped mid-read is
ColdTierUnavailable and reads work again after a restart; wrong secret and missing bucket are
typed errors; garbage, truncated and bit-flipped objects are ColdObjectCorrupt; clean_orphans
removes only what is not kept.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq
import pytest

from common.config import default_config
from common.errors import (
    ColdObjectCorrupt,
    ColdTierAccessDenied,
    ColdTierBucketMissing,
    ColdTierUnavailable,
    StrataError,
)
from entries import batch as eb
from entries.entry import build_entry
from ledger.cold import ColdCopy
from ledger.handle import ReadHandle
from offload import keys, open_cold_storage
from offload.s3 import S3Settings
from offload.tier import S3ColdStorage
from proto import pulsar_api_pb2 as pb
from tests.ledger.conftest import LedgerEnv, run, shutdown

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]
ML = "acme/orders/persistent/paid-partition-2"
PART_BYTES = 5 * 1024 * 1024          # S3's minimum part
ROW_GROUP_BYTES = 64 * 1024           # the setting's minimum: many row groups per ledger


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LedgerEnv]:
    """Bookie processes and a SQLite metadata store, as tests/ledger/conftest.py's `env`."""
    e = LedgerEnv(tmp_path, f"sqlite:///{tmp_path}/meta.db", tmp_path / "bookie.toml")
    e.set_bookie_config()
    try:
        yield e
    finally:
        for bookie in e.bookies:
            bookie.close()


def offload_settings(srv: Any, bucket: str, **overrides: Any) -> dict[str, Any]:
    values = dict(offload_driver="s3", offload_s3_endpoint=srv.endpoint, offload_s3_region=srv.region,
                  offload_s3_bucket=bucket, offload_s3_prefix="strata", offload_s3_part_bytes=PART_BYTES,
                  offload_row_group_bytes=ROW_GROUP_BYTES, offload_s3_connect_timeout_ms=1_000,
                  offload_s3_read_timeout_ms=5_000)
    values.update(overrides)
    return values


def config_for(srv: Any, bucket: str, **overrides: Any):
    return default_config(**offload_settings(srv, bucket, **overrides))


def storage_for(srv: Any, bucket: str, *, secret: str | None = None, **overrides: Any) -> S3ColdStorage:
    storage = open_cold_storage(config_for(srv, bucket, **overrides), access_key=srv.access_key,
                                secret_key=secret or srv.secret_key)
    assert isinstance(storage, S3ColdStorage)
    return storage


def make_entries(count: int, seed: int, payload_bytes: int = 1000) -> list[bytes]:
    """Stored entries as producers make them: single messages and batches, none/LZ4/ZSTD."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = i % 4
        publish_ms = 1_700_000_000_000 + i
        if kind == 0:
            md = pb.MessageMetadata(producer_name="solo", sequence_id=i, publish_time=publish_ms)
            out.append(build_entry(md, rng.randbytes(rng.randint(0, payload_bytes))))
            continue
        members = [eb.BatchMessage(payload=rng.randbytes(payload_bytes // 4) + b"x" * 16,
                                   properties={"i": str(i)}, partition_key=f"k{i % 7}")
                   for _ in range(1 + kind)]
        compression = (eb.NONE, eb.LZ4, eb.ZSTD)[kind - 1]
        md, payload = eb.build_batch(members, producer_name=f"p{kind}", sequence_id=i * 10,
                                     publish_time_ms=publish_ms, compression=compression)
        out.append(build_entry(md, payload))
    return out


async def write_ledger(client: Any, entries: list[bytes]) -> ReadHandle:
    handle = await client.create_ledger(1, 1, 1)
    window = [handle.add_future(e) for e in entries]
    await asyncio.gather(*window)
    await handle.close()
    return await client.open_ledger(handle.ledger_id, recover=False)


async def until_ok(call: Callable[[], Awaitable[T]], retried: type[StrataError], bound_s: float = 30.0) -> T:
    """`await call()`, retried on `retried` errors for at most `bound_s`."""
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + bound_s
    while True:
        try:
            return await call()
        except retried:
            if loop.time() > deadline_s:
                raise
        await asyncio.sleep(0.2)


async def offload_retried(storage: S3ColdStorage, source: ReadHandle, entries: int, bound_s: float = 60.0) -> ColdCopy:
    """Offload, retrying retriable errors (a bookie coming back) for at most `bound_s`."""
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + bound_s
    while True:
        try:
            return await storage.offload(ML, source.ledger_id, source, entries)
        except StrataError as exc:
            if not exc.retriable or loop.time() > deadline_s:
                raise
        await asyncio.sleep(0.5)


async def read_all(storage: S3ColdStorage, copy: ColdCopy, step: int) -> list[bytes]:
    out: list[bytes] = []
    for first in range(0, copy.entries, step):
        got = await storage.read(copy, first, min(copy.entries, first + step) - 1)
        assert [e for e, _ in got] == list(range(first, first + len(got)))
        out.extend(d for _, d in got)
    return out


def test_offload_then_read_back_byte_identical(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(10_000, seed=1)

    async def body():
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        storage = storage_for(s3_server, bucket)
        await storage.check()
        seen: list[tuple[int, int]] = []
        copy = await storage.offload(ML, source.ledger_id, source, len(entries), lambda d, t: seen.append((d, t)))
        assert copy.key == keys.ledger_key("strata", ML, source.ledger_id)
        assert copy.entries == len(entries) and copy.size_bytes > PART_BYTES  # a real multipart upload
        assert seen[-1] == (len(entries), len(entries)) and len(seen) > 1
        head = s3_server.boto3_client().head_object(Bucket=bucket, Key=copy.key)
        assert head["ContentLength"] == copy.size_bytes and head["ETag"].endswith('-2"')
        assert head["Metadata"]["strata.ledger_id"] == str(source.ledger_id)
        assert head["Metadata"]["strata.topic"] == "persistent://acme/orders/paid-partition-2"
        assert s3_server.boto3_client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        # sequential reads that cross row groups: served with read-ahead, each row group fetched once
        assert await read_all(storage, copy, 37) == entries
        body_bytes = s3_server.boto3_client().get_object(Bucket=bucket, Key=copy.key)["Body"].read()
        row_groups = pq.ParquetFile(io.BytesIO(body_bytes)).num_row_groups
        stats = storage.read_stats
        assert row_groups > 20 and stats.footer_fetches == 1 and stats.row_group_fetches == row_groups
        assert stats.read_ahead_fetches >= row_groups - 1 and stats.cache_hits > 0
        # a fresh tier (no cached footer or row group), odd ranges, concurrent readers sharing fetches
        fresh = storage_for(s3_server, bucket, offload_read_ahead_row_groups_max=0)
        rng = random.Random(2)
        ranges = [(a, min(len(entries) - 1, a + rng.randint(0, 400))) for a in
                  (rng.randrange(len(entries)) for _ in range(30))] + [(0, len(entries) - 1)]
        results = await asyncio.gather(*(fresh.read(copy, a, b) for a, b in ranges))
        for (a, b), got in zip(ranges, results):
            assert [d for _, d in got] == entries[a:b + 1]
        assert fresh.read_stats.footer_fetches == 1 and fresh.read_stats.shared_waits > 0
        assert fresh.read_stats.row_group_fetches <= row_groups + 1   # shared: not once per reader
        uncached = storage_for(s3_server, bucket, offload_read_cache_bytes_max=0)
        assert [d for _, d in await uncached.read(copy, 100, 2100)] == entries[100:2101]
        for s in (storage, fresh, uncached):
            await s.close()
        await shutdown(store, client)
    run(body())


def test_reoffload_is_idempotent(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(300, seed=3)

    async def body():
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        storage = storage_for(s3_server, bucket)
        first = await storage.offload(ML, source.ledger_id, source, len(entries))
        modified = s3_server.boto3_client().head_object(Bucket=bucket, Key=first.key)["LastModified"]
        again = await storage.offload(ML, source.ledger_id, source, len(entries))
        restarted = storage_for(s3_server, bucket)             # as after a broker restart
        third = await restarted.offload(ML, source.ledger_id, source, len(entries))
        assert (again.key, again.size_bytes, again.entries) == (first.key, first.size_bytes, first.entries)
        assert (third.key, third.size_bytes) == (first.key, first.size_bytes)
        assert s3_server.boto3_client().head_object(Bucket=bucket, Key=first.key)["LastModified"] == modified
        listed = s3_server.boto3_client().list_objects_v2(Bucket=bucket, Prefix="strata/")["Contents"]
        assert [o["Key"] for o in listed] == [first.key]
        assert [d for _, d in await restarted.read(third, 0, len(entries) - 1)] == entries
        await storage.close()
        await restarted.close()
        await shutdown(store, client)
    run(body())


def test_failure_mid_upload_leaves_nothing_and_stale_uploads_are_aborted(env, s3_server):
    [bookie] = env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(16_000, seed=4)

    async def body():
        store, client = await env.open(env.config(ledger_read_timeout_ms=2_000))
        source = await write_ledger(client, entries)
        key = keys.ledger_key("strata", ML, source.ledger_id)
        s3 = s3_server.boto3_client()
        # a crashed earlier attempt left an incomplete upload with one part
        stale = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        s3.upload_part(Bucket=bucket, Key=key, UploadId=stale, PartNumber=1, Body=b"s" * PART_BYTES)
        storage = storage_for(s3_server, bucket)

        def progress(done: int, total: int) -> None:
            uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
            if done > total // 2 and uploads and bookie.alive():
                assert [u["UploadId"] for u in uploads] != [stale]   # the stale one is gone already
                bookie.kill9()                                       # the bookies fail mid-upload
        with pytest.raises(StrataError):
            await storage.offload(ML, source.ledger_id, source, len(entries), progress)
        assert not bookie.alive()
        assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []   # aborted
        assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="strata/")  # nothing visible
        await shutdown(store, client)
        bookie.restart()
        store, client = await env.open(env.config())
        source = await client.open_ledger(source.ledger_id, recover=False)
        copy = await offload_retried(storage, source, len(entries))   # as the broker retries, with a bound
        assert [d for _, d in await storage.read(copy, 0, len(entries) - 1)] == entries
        await storage.close()
        await shutdown(store, client)
    run(body())


# The child of the kill -9 test: offloads one ledger and, once its multipart upload exists and
# a part is up, says so and hangs (the parent kills it there, as a crash would).
CRASHING_OFFLOADER = """
import asyncio, json, random, sys
import metadata
from common.config import default_config
from ledger.client import LedgerClient
from metadata.aio import AsyncMetadataStore
from offload import open_cold_storage

args = json.loads(sys.argv[1])

async def main():
    config = default_config(**args["config"])
    store = AsyncMetadataStore(metadata.open_store(args["metadata_url"], config=config))
    client = LedgerClient(store, config, rng=random.Random(0))
    source = await client.open_ledger(args["ledger_id"], recover=False)
    storage = open_cold_storage(config, access_key=args["access_key"], secret_key=args["secret_key"])
    bucket = storage.bucket
    upload_part = bucket.upload_part

    async def first_part_then_hang(*part_args, **part_kwargs):
        etag = await upload_part(*part_args, **part_kwargs)   # this part is really in S3 now
        print("UPLOADING", flush=True)
        await asyncio.sleep(120)                              # the object is never completed
        return etag

    bucket.upload_part = first_part_then_hang
    progress = None
    await storage.offload(args["ml"], args["ledger_id"], source, args["entries"], progress)
    print("FINISHED", flush=True)

asyncio.run(main())
"""


def test_kill9_mid_upload_leaves_nothing_visible_and_the_next_attempt_completes(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(16_000, seed=9)

    async def body():
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        args = {"config": offload_settings(s3_server, bucket), "metadata_url": env.metadata_url,
                "ledger_id": source.ledger_id, "ml": ML,
                "entries": len(entries), "bucket": bucket, "access_key": s3_server.access_key,
                "secret_key": s3_server.secret_key}
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CRASHING_OFFLOADER, json.dumps(args), cwd=REPO_ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            line = await asyncio.wait_for(present_line(child), 90)
            assert line == b"UPLOADING\n", (line, (await child.stderr.read())[-3000:])  # type: ignore[union-attr]
        finally:
            child.kill()                                            # kill -9 mid-upload
            await asyncio.wait_for(child.wait(), 30)
        s3 = s3_server.boto3_client()
        key = keys.ledger_key("strata", ML, source.ledger_id)
        uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        assert [u["Key"] for u in uploads] == [key]                 # left behind, as after a crash
        assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="strata/")  # nothing visible
        storage = storage_for(s3_server, bucket)
        copy = await storage.offload(ML, source.ledger_id, source, len(entries))
        assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []   # the stale one aborted
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="strata/")["Contents"]] == [key]
        assert [d for _, d in await storage.read(copy, 0, len(entries) - 1)] == entries
        await storage.close()
        await shutdown(store, client)
    run(body())


async def present_line(child: asyncio.subprocess.Process) -> bytes:
    assert child.stdout is not None
    return await child.stdout.readline()


def test_cancelled_offload_aborts_its_upload(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(12_000, seed=5)

    async def body():
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        storage = storage_for(s3_server, bucket)
        s3 = s3_server.boto3_client()
        started = asyncio.Event()

        def progress(done: int, total: int) -> None:
            if s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
                started.set()
        task = asyncio.ensure_future(storage.offload(ML, source.ledger_id, source, len(entries), progress))
        await asyncio.wait_for(started.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="strata/")
        await storage.close()
        await shutdown(store, client)
    run(body())


def test_s3_stopped_mid_read_is_unavailable_then_reads_resume(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(1500, seed=6)

    async def body():
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        storage = storage_for(s3_server, bucket, offload_read_cache_bytes_max=0)
        copy = await storage.offload(ML, source.ledger_id, source, len(entries))
        assert [d for _, d in await storage.read(copy, 0, 99)] == entries[:100]
        await asyncio.to_thread(s3_server.stop)
        loop = asyncio.get_running_loop()
        started_s = loop.time()
        with pytest.raises(ColdTierUnavailable):
            await storage.read(copy, 100, 999)
        with pytest.raises(ColdTierUnavailable):
            await storage.offload(ML, source.ledger_id, source, len(entries))
        assert loop.time() - started_s < 30
        await asyncio.to_thread(s3_server.start)
        # the dispatcher waits and retries a ColdTierUnavailable (a just-restarted server may
        # refuse for a moment while its volume registers)
        got = await until_ok(lambda: storage.read(copy, 100, len(entries) - 1), ColdTierUnavailable)
        assert [d for _, d in got] == entries[100:]
        await storage.close()
        await shutdown(store, client)
    try:
        run(body())
    finally:
        s3_server.start()                          # shared by the run: leave it serving


def test_wrong_secret_and_missing_bucket_are_typed_errors(s3_server):
    bucket = s3_server.new_bucket()

    async def body():
        wrong = storage_for(s3_server, bucket, secret="not-the-secret")
        with pytest.raises(ColdTierAccessDenied):
            await wrong.check()
        missing = storage_for(s3_server, f"missing-{uuid.uuid4().hex[:8]}")
        with pytest.raises(ColdTierBucketMissing):
            await missing.check()
        good = storage_for(s3_server, bucket)
        await good.check()
        listed = s3_server.boto3_client().list_objects_v2(Bucket=bucket)
        assert "Contents" not in listed                       # the probe cleaned up after itself
        for s in (wrong, missing, good):
            await s.close()
    run(body())
    assert open_cold_storage(default_config()) is None       # no driver: no cold tier


def test_corrupt_objects_are_refused(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    entries = make_entries(800, seed=7)

    async def body():
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        storage = storage_for(s3_server, bucket)
        copy = await storage.offload(ML, source.ledger_id, source, len(entries))
        s3 = s3_server.boto3_client()
        good = s3.get_object(Bucket=bucket, Key=copy.key)["Body"].read()
        flipped = bytearray(good)
        for offset in range(len(good) // 3, len(good) // 3 + 64):   # inside a row group's pages
            flipped[offset] ^= 0xFF
        variants = {"garbage": random.Random(8).randbytes(len(good)), "truncated": good[:len(good) // 2],
                    "flipped": bytes(flipped), "footer only": b"\0" * (len(good) - 4) + b"PAR1"}
        for name, data in variants.items():
            s3.put_object(Bucket=bucket, Key=copy.key, Body=data)
            reader = storage_for(s3_server, bucket)                   # no cached footer
            with pytest.raises(ColdObjectCorrupt):
                await reader.read(copy, 0, len(entries) - 1)
            await reader.close()
            assert name
        s3.put_object(Bucket=bucket, Key=copy.key, Body=good)
        fresh = storage_for(s3_server, bucket)
        assert [d for _, d in await fresh.read(copy, 0, len(entries) - 1)] == entries
        await storage.close()
        await fresh.close()
        await shutdown(store, client)
    run(body())


def test_clean_orphans_removes_only_what_is_not_kept(env, s3_server):
    env.start_bookies(1)
    bucket = s3_server.new_bucket()

    async def body():
        store, client = await env.open(env.config())
        storage = storage_for(s3_server, bucket)
        copies = []
        for seed in range(3):
            source = await write_ledger(client, make_entries(50, seed=seed))
            copies.append(await storage.offload(ML, source.ledger_id, source, 50))
        kept_copy, orphan_copy, other_kept = copies
        s3 = s3_server.boto3_client()
        ids = [keys.ledger_id_of(c.key) for c in copies]
        orphan_upload_key = keys.ledger_key("strata", ML, 999_999)
        kept_upload_key = keys.ledger_key("strata", ML, ids[0])
        s3.create_multipart_upload(Bucket=bucket, Key=orphan_upload_key)
        s3.create_multipart_upload(Bucket=bucket, Key=kept_upload_key)
        neighbour = keys.ledger_key("strata", "acme/orders/persistent/paid-partition-3", 12345)
        foreign = keys.topic_prefix("strata", ML) + "notes.txt"
        for key in (neighbour, foreign):
            s3.put_object(Bucket=bucket, Key=key, Body=b"x")
        removed = await storage.clean_orphans(ML, {ids[0], ids[2]})
        assert sorted(removed) == sorted([orphan_copy.key, orphan_upload_key])
        left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
        assert left == sorted([kept_copy.key, other_kept.key, neighbour, foreign])
        uploads = [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]
        assert uploads == [kept_upload_key]
        assert await storage.clean_orphans(ML, {ids[0], ids[2]}) == []
        await storage.delete(orphan_copy)                          # already gone: fine
        await storage.close()
        await shutdown(store, client)
    run(body())


def test_settings_reach_the_tier(s3_server):
    config = config_for(s3_server, "b", offload_s3_parts_in_flight_max=3, offload_open_objects_max=7)
    settings = S3Settings.from_config(config)
    assert (settings.parts_in_flight_max, settings.open_objects_max, settings.access_key) == (3, 7, None)
