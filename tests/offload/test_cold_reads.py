"""offload.cold_reader against the run's real SeaweedFS (through tests/offload/s3_proxy.py, which
counts the GETs under way): one sequential reader keeps several ranged GETs in flight, never more
than `offload_s3_reads_in_flight_max`; read-ahead stays within `offload_read_ahead_bytes_max`;
throttled GETs are retried and the entries come back byte for byte."""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from common.config import default_config
from entries import batch as eb
from entries.entry import build_entry
from ledger.cold import ColdCopy
from offload import format as fmt
from offload import keys
from offload.cold_reader import ColdReader
from offload.s3 import S3Bucket, S3Settings
from tests.offload.s3_proxy import ThrottlingProxy

ML = "acme/orders/persistent/cold-reads"
LEDGER_ID = 11
RANGE_BYTES = 64 * 1024               # the setting's minimum: several GETs per row group
ROW_GROUP_BYTES = 256 * 1024


@pytest.fixture
def proxy(s3_server: Any) -> Iterator[ThrottlingProxy]:
    p = ThrottlingProxy(s3_server.endpoint)
    yield p
    p.close()


def plain_entries(count: int, seed: int) -> list[bytes]:
    """Batches of 16 random 1 KiB messages, as the perf workload writes them."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        md, payload = eb.build_batch([eb.BatchMessage(payload=rng.randbytes(1024)) for _ in range(16)],
                                     producer_name="p", sequence_id=i * 16, publish_time_ms=1_700_000_000_000 + i)
        out.append(build_entry(md, payload))
    return out


def upload_object(srv: Any, bucket: str, entries: list[bytes]) -> ColdCopy:
    """The entries as an offloaded ledger's object, put straight into the bucket."""
    sink = io.BytesIO()
    writer = fmt.LedgerWriter(sink, fmt.LedgerOrigin("persistent://acme/orders/cold-reads", -1, LEDGER_ID),
                              ROW_GROUP_BYTES)
    for entry_id, data in enumerate(entries):
        writer.add(entry_id, data)
    writer.close()
    key = keys.ledger_key("strata", ML, LEDGER_ID)
    srv.boto3_client().put_object(Bucket=bucket, Key=key, Body=sink.getvalue())
    return ColdCopy(key, len(sink.getvalue()), len(entries), 1_700_000_000_000, fmt.FORMAT_VERSION)


def reader_via(proxy: ThrottlingProxy, srv: Any, bucket: str, **overrides: Any) -> tuple[ColdReader, S3Bucket]:
    values: dict[str, Any] = dict(offload_driver="s3", offload_s3_endpoint=proxy.endpoint,
                                  offload_s3_region=srv.region, offload_s3_bucket=bucket,
                                  offload_s3_read_range_bytes=RANGE_BYTES, offload_s3_reads_in_flight_max=6,
                                  offload_read_ahead_row_groups_max=8, offload_read_ahead_bytes_max=600 * 1024,
                                  offload_s3_throttle_backoff_max_ms=20)
    values.update(overrides)
    settings = S3Settings.from_config(default_config(**values), access_key=srv.access_key, secret_key=srv.secret_key)
    s3 = S3Bucket(settings, rng=random.Random(1))
    return ColdReader(s3, ThreadPoolExecutor(2)), s3


def test_a_sequential_reader_keeps_several_gets_in_flight_within_the_bounds(proxy: ThrottlingProxy,
                                                                            s3_server: Any, seed: int) -> None:
    bucket = s3_server.new_bucket()
    entries = plain_entries(400, seed)
    copy = upload_object(s3_server, bucket, entries)

    async def body() -> None:
        reader, s3 = reader_via(proxy, s3_server, bucket)
        got: list[bytes] = []
        for first in range(0, len(entries), 25):
            got.extend(d for _, d in await reader.read(copy, first, min(len(entries), first + 25) - 1))
        assert got == entries
        stats = reader.stats
        assert stats.row_group_fetches > 5 and stats.range_gets >= 4 * stats.row_group_fetches
        assert 1 < stats.gets_in_flight_peak <= 6 and 1 < proxy.in_flight_peak <= 6 + 1   # + the footer's
        assert 0 < stats.ahead_bytes_peak <= 600 * 1024
        assert stats.read_ahead_fetches >= stats.row_group_fetches - 2
        await reader.close()
        s3.close()
    asyncio.run(body())


def test_throttled_gets_are_retried_and_the_entries_come_back_whole(proxy: ThrottlingProxy,
                                                                    s3_server: Any, seed: int) -> None:
    bucket = s3_server.new_bucket()
    entries = plain_entries(120, seed)
    copy = upload_object(s3_server, bucket, entries)

    async def body() -> None:
        reader, s3 = reader_via(proxy, s3_server, bucket, offload_read_ahead_bytes_max=0)
        proxy.throttle_next = 7
        got = await reader.read(copy, 0, len(entries) - 1)
        assert [d for _, d in got] == entries and proxy.throttled == 7
        assert reader.stats.read_ahead_fetches == 0               # no bytes allowed ahead: none
        await reader.close()
        s3.close()
    asyncio.run(body())
