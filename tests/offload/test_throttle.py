"""A throttled S3: offload.s3 retries 503 SlowDown / 429 with jittered exponential backoff,
bounded by attempts and time, and counts every throttled answer.

The S3 here is the run's real SeaweedFS behind a small real HTTP proxy (tests/offload/s3_proxy.py)
that answers the next N requests with a real S3 throttling error and forwards everything else
byte for byte, so botocore parses real responses and the SigV4 signatures still hold.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.stats.metrics import retry_lines
from common import retry
from common.config import default_config
from common.errors import ColdTierUnavailable
from offload import throttle
from offload.s3 import S3Bucket, S3Settings
from tests.offload.s3_proxy import TOO_MANY, ThrottlingProxy

MIB = 1024 * 1024
@pytest.fixture
def proxy(s3_server: Any) -> Iterator[ThrottlingProxy]:
    p = ThrottlingProxy(s3_server.endpoint)
    yield p
    p.close()


def bucket_via(proxy: ThrottlingProxy, srv: Any, bucket: str, **overrides: Any) -> S3Bucket:
    values: dict[str, Any] = dict(offload_driver="s3", offload_s3_endpoint=proxy.endpoint,
                                  offload_s3_region=srv.region, offload_s3_bucket=bucket,
                                  offload_s3_connect_timeout_ms=1_000, offload_s3_read_timeout_ms=5_000,
                                  offload_s3_throttle_backoff_max_ms=40)
    values.update(overrides)
    settings = S3Settings.from_config(default_config(**values), access_key=srv.access_key, secret_key=srv.secret_key)
    return S3Bucket(settings, rng=random.Random(7))


def test_slow_down_is_retried_counted_and_the_call_succeeds(proxy: ThrottlingProxy, s3_server: Any) -> None:
    name = s3_server.new_bucket()

    async def body() -> None:
        bucket = bucket_via(proxy, s3_server, name)
        before, retries_before = throttle.snapshot(), retry.RETRIES.get("offload.s3_throttled", 0)
        proxy.throttle_next = 3
        await bucket.put("a/x", b"0123456789", {"k": "v"})
        assert proxy.throttled == 3 and proxy.seen["PUT"] == 4
        proxy.throttle_next = 2
        assert await bucket.get_range("a/x", 2, 5) == b"2345"
        proxy.status, proxy.body, proxy.throttle_next = 429, TOO_MANY, 1
        assert (await bucket.head("a/x"))["ContentLength"] == 10
        after = throttle.snapshot()
        assert after.get("put_object", 0) - before.get("put_object", 0) == 3
        assert after.get("get_object", 0) - before.get("get_object", 0) == 2
        assert after.get("head_object", 0) - before.get("head_object", 0) == 1
        assert retry.RETRIES["offload.s3_throttled"] - retries_before == 6
        exported = [line for line in retry_lines() if line.startswith("strata_offload_s3_throttled_total{")]
        assert any('op="put_object"' in line and line.endswith(f" {after['put_object']}.0") for line in exported)
        got = s3_server.boto3_client().get_object(Bucket=name, Key="a/x")
        assert got["Body"].read() == b"0123456789" and got["Metadata"] == {"k": "v"}
        bucket.close()
    asyncio.run(body())


def test_a_multipart_upload_under_throttling_completes_whole(proxy: ThrottlingProxy, s3_server: Any) -> None:
    name = s3_server.new_bucket()
    parts = [random.Random(i).randbytes(5 * MIB) for i in range(3)] + [b"tail"]

    async def body() -> None:
        bucket = bucket_via(proxy, s3_server, name)
        proxy.throttle_next = 2
        upload_id = await bucket.create_multipart("m/obj", {})
        proxy.throttle_next = 5   # spread over the parts uploading at once
        etags = await asyncio.gather(*(bucket.upload_part("m/obj", upload_id, i + 1, data)
                                       for i, data in enumerate(parts)))
        proxy.throttle_next = 1
        await bucket.complete_multipart("m/obj", upload_id, list(etags))
        assert proxy.throttled == 8
        bucket.close()
    asyncio.run(body())
    assert s3_server.boto3_client().get_object(Bucket=name, Key="m/obj")["Body"].read() == b"".join(parts)


def test_throttling_that_does_not_stop_fails_after_the_bound(proxy: ThrottlingProxy, s3_server: Any) -> None:
    name = s3_server.new_bucket()

    async def body() -> None:
        bucket = bucket_via(proxy, s3_server, name, offload_s3_throttle_attempts_max=4)
        exhausted = retry.EXHAUSTED.get("offload.s3_throttled", 0)
        proxy.throttle_next = 1_000
        with pytest.raises(ColdTierUnavailable) as caught:
            await bucket.put("b/x", b"x", {})
        assert caught.value.details["s3_code"] == "SlowDown" and caught.value.details["http_status"] == 503
        assert proxy.seen["PUT"] == 4                       # attempts, not one more
        assert retry.EXHAUSTED["offload.s3_throttled"] == exhausted + 1
        # the deadline bounds it too: long waits, a short deadline
        slow = bucket_via(proxy, s3_server, name, offload_s3_throttle_backoff_max_ms=400,
                          offload_s3_throttle_deadline_ms=300)
        started_s = time.monotonic()
        with pytest.raises(ColdTierUnavailable):
            await slow.put("b/y", b"y", {})
        assert time.monotonic() - started_s < 3.0
        bucket.close()
        slow.close()
    asyncio.run(body())


def test_waits_are_jittered_exponential_and_capped() -> None:
    wait = throttle.full_jitter(0.05, 2.0)
    rng = random.Random(3)
    for attempt in range(1, 30):
        cap = min(2.0, 0.05 * 2 ** (attempt - 1))
        samples = [wait(attempt, rng) for _ in range(200)]
        assert all(0.0 <= s <= cap for s in samples)
        assert max(samples) > cap * 0.8 and min(samples) < cap * 0.2   # spread over the whole range
    assert not throttle.is_throttle(ColdTierUnavailable("down", s3_code="InternalError", http_status=500))
    assert throttle.is_throttle(ColdTierUnavailable("slow", s3_code="", http_status=503))
