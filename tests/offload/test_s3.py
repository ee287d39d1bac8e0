"""offload.s3 on moto (quick, in-process): the bucket wrapper's calls and the translation of
botocore's exceptions into the cold-tier errors. The same paths against a real SeaweedFS over
HTTP with SigV4 are in test_tier.py."""

from __future__ import annotations

import asyncio

import botocore.exceptions
import pytest
from moto import mock_aws

from common.config import default_config
from common.errors import (
    ColdObjectCorrupt,
    ColdObjectMissing,
    ColdTierAccessDenied,
    ColdTierBucketMissing,
    ColdTierError,
    ColdTierUnavailable,
)
from common.net import free_port
from offload.s3 import S3Bucket, S3Settings, content_range_total, translate

MIB = 1024 * 1024


def settings(bucket: str = "bkt", endpoint: str = "", **overrides) -> S3Settings:
    config = default_config(offload_driver="s3", offload_s3_bucket=bucket, offload_s3_endpoint=endpoint,
                            offload_s3_connect_timeout_ms=500, offload_s3_read_timeout_ms=1_000, **overrides)
    return S3Settings.from_config(config, access_key="testing", secret_key="testing")


def client_error(code: str, status: int) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError({"Error": {"Code": code, "Message": "m"},
                                            "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(("code", "status", "key", "error"), [
    ("InvalidAccessKeyId", 403, "k", ColdTierAccessDenied),
    ("SignatureDoesNotMatch", 403, None, ColdTierAccessDenied),
    ("AccessDenied", 403, "k", ColdTierAccessDenied),
    ("403", 403, None, ColdTierAccessDenied),
    ("NoSuchBucket", 404, "k", ColdTierBucketMissing),
    ("404", 404, None, ColdTierBucketMissing),          # HEAD bucket
    ("NoSuchKey", 404, "k", ColdObjectMissing),
    ("404", 404, "k", ColdObjectMissing),               # HEAD object
    ("NoSuchUpload", 404, "k", ColdObjectMissing),
    ("InvalidRange", 416, "k", ColdObjectCorrupt),
    ("SlowDown", 503, "k", ColdTierUnavailable),
    ("InternalError", 500, "k", ColdTierUnavailable),
    ("502", 502, None, ColdTierUnavailable),
    ("MalformedXML", 400, "k", ColdTierError),
])
def test_client_errors_translate(code, status, key, error):
    got = translate(client_error(code, status), bucket="b", key=key, op="x")
    assert type(got) is error
    assert got.details["bucket"] == "b"


def test_transport_errors_translate_to_unavailable():
    for exc in (botocore.exceptions.EndpointConnectionError(endpoint_url="http://x"),
                botocore.exceptions.ConnectTimeoutError(endpoint_url="http://x"),
                botocore.exceptions.ReadTimeoutError(endpoint_url="http://x"),
                ConnectionResetError()):
        assert type(translate(exc, bucket="b")) is ColdTierUnavailable
    assert type(translate(botocore.exceptions.NoCredentialsError(), bucket="b")) is ColdTierAccessDenied
    assert ColdTierUnavailable.retriable and not ColdTierAccessDenied.retriable


def test_content_range():
    assert content_range_total("bytes 6-10/22") == 22
    with pytest.raises(ColdTierError):
        content_range_total("garbage")


def test_settings_from_config():
    s = settings(offload_s3_prefix="/a/b/", offload_s3_parts_in_flight_max=3)
    assert (s.prefix, s.parts_in_flight_max, s.connect_timeout_s, s.read_timeout_s) == ("a/b", 3, 0.5, 1.0)
    assert s.io_threads == 3 + s.reads_in_flight_max + 4


def test_objects_ranges_multipart_and_missing_things_on_moto():
    async def body():
        bucket = S3Bucket(settings())
        bucket._client.create_bucket(Bucket="bkt")
        await bucket.check_access()
        await bucket.put("p/x/a", b"0123456789", {"strata.ledger_id": "5"})
        assert (await bucket.head("p/x/a"))["Metadata"] == {"strata.ledger_id": "5"}
        assert await bucket.get_range("p/x/a", 2, 4) == b"234"
        assert await bucket.get_suffix("p/x/a", 3) == (b"789", 10)
        assert await bucket.get_suffix("p/x/a", 100) == (b"0123456789", 10)
        with pytest.raises(ColdObjectCorrupt):
            await bucket.get_range("p/x/a", 20, 30)                  # past the end: 416
        with pytest.raises(ColdObjectMissing):
            await bucket.head("p/x/none")
        with pytest.raises(ColdObjectMissing):
            await bucket.get_range("p/x/none", 0, 1)
        part = b"a" * (5 * MIB)
        upload_id = await bucket.create_multipart("p/x/m", {"k": "v"})
        assert await bucket.list_multipart("p/x/") == [("p/x/m", upload_id)]
        with pytest.raises(ColdObjectMissing):
            await bucket.head("p/x/m")                               # invisible until complete
        etags = [await bucket.upload_part("p/x/m", upload_id, 1, part),
                 await bucket.upload_part("p/x/m", upload_id, 2, b"tail")]
        await bucket.complete_multipart("p/x/m", upload_id, etags)
        assert (await bucket.head("p/x/m"))["ContentLength"] == len(part) + 4
        assert await bucket.get_range("p/x/m", len(part) - 1, len(part) + 3) == b"atail"
        other = await bucket.create_multipart("p/x/gone", {})
        await bucket.abort_multipart("p/x/gone", other)
        await bucket.abort_multipart("p/x/gone", other)              # already gone: fine
        assert await bucket.list_multipart("p/x/") == []
        await bucket.put("p/x/deeper/c", b"c", {})
        assert sorted(await bucket.list_keys("p/x/")) == ["p/x/a", "p/x/m"]
        await bucket.delete("p/x/a")
        await bucket.delete("p/x/a")                                  # idempotent
        assert sorted(await bucket.list_keys("p/x/")) == ["p/x/m"]
        bucket.close()
    with mock_aws():
        asyncio.run(body())


def test_missing_bucket_on_moto():
    async def body():
        bucket = S3Bucket(settings("nope"))
        with pytest.raises(ColdTierBucketMissing):
            await bucket.check_access()
        with pytest.raises(ColdTierBucketMissing):
            await bucket.put("k", b"x", {})
        bucket.close()
    with mock_aws():
        asyncio.run(body())


def test_nothing_listening_is_unavailable_in_bounded_time():
    async def body():
        bucket = S3Bucket(settings(endpoint=f"http://127.0.0.1:{free_port()}"))
        loop = asyncio.get_running_loop()
        started_s = loop.time()
        with pytest.raises(ColdTierUnavailable):
            await bucket.get_range("k", 0, 10)
        assert loop.time() - started_s < 10
        bucket.close()
    asyncio.run(body())
