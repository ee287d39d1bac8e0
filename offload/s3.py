"""The one place Strata talks to S3: settings, one boto3 client per tier, and the translation of
every botocore/boto3 exception into the cold-tier errors of `common.errors`.

`S3Settings.from_config` reads the `offload_s3_*` settings. Credentials are boto3's usual chain
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, an instance role) unless an access key and
secret are passed explicitly (tests, the embedded SeaweedFS). `S3Bucket` wraps one boto3 client
bound to one bucket: path-style addressing when an endpoint is set (MinIO, SeaweedFS), SigV4,
the connect/read timeouts of the settings, and no retries of botocore's own: every call is
retried here (common.retry), where each retry is seen, logged and counted:
- a throttled call (503 SlowDown, 429, ...: `offload.throttle`) under the bucket's throttle
  policy: exponential backoff with full jitter, at most `offload_s3_throttle_attempts_max`
  attempts and `offload_s3_throttle_deadline_ms`; every throttled answer is counted
  (`offload.throttle.THROTTLED`, the broker's `strata_offload_s3_throttled_total`);
- any other ColdTierUnavailable (cannot connect, timeout, 500) under `_S3_RETRY`: a few quick
  attempts, so a dead endpoint is an error in bounded time.

boto3 is blocking: every call runs in this bucket's own bounded thread pool (`io_threads`),
never on the event loop and never in the loop's default executor.

Error translation (`translate`), the only place a foreign exception becomes ours:
- cannot connect, timeout, connection dropped, 5xx, throttling -> ColdTierUnavailable (retriable)
- InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied, any 403, no credentials
  -> ColdTierAccessDenied
- NoSuchBucket (and a 404 of HEAD bucket) -> ColdTierBucketMissing
- NoSuchKey, NoSuchUpload, any other 404 -> ColdObjectMissing
- 416 (a range past the object's end) -> ColdObjectCorrupt: the object is shorter than its footer says
- anything else from botocore -> ColdTierError with the S3 code

What must hold: no botocore exception escapes this module; a response body is read whole
inside the worker thread (a short body is an error, never short bytes).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
import botocore.config
import botocore.exceptions

from common import retry
from common.config import Config
from common.errors import (
    ColdObjectCorrupt,
    ColdObjectMissing,
    ColdTierAccessDenied,
    ColdTierBucketMissing,
    ColdTierError,
    ColdTierUnavailable,
    ShuttingDown,
    StrataError,
)
from offload import throttle

log = logging.getLogger(__name__)
T = TypeVar("T")

BOTOCORE_ATTEMPTS_MAX = 1            # botocore retries nothing: the policies here do, and count it
_S3_RETRY = retry.Retry("offload.s3_call", retry_on=ColdTierUnavailable, attempts_max=4,
                        wait=retry.exponential(0.1, 1.0), when=lambda exc: not throttle.is_throttle(exc),
                        log_level=logging.INFO)
_UNAVAILABLE_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
                      "ServiceUnavailable", "InternalError", "RequestLimitExceeded", "TooManyRequests"}
_DENIED_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "AllAccessDisabled",
                 "InvalidToken", "ExpiredToken", "AccountProblem"}
_MISSING_CODES = {"NoSuchKey", "NoSuchUpload", "NotFound"}
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


@dataclass(frozen=True)
class S3Settings:
    endpoint: str                 # "" = AWS's own endpoint for the region
    region: str
    bucket: str
    prefix: str                   # key prefix, no leading/trailing "/" ("" = bucket root)
    connect_timeout_s: float
    read_timeout_s: float
    part_bytes: int               # multipart part size
    parts_in_flight_max: int      # parts of one object uploading at once
    row_group_bytes: int          # target payload bytes per Parquet row group
    read_ahead_row_groups_max: int
    read_cache_bytes_max: int     # decoded row groups kept for readers
    open_objects_max: int         # footers kept
    throttle_attempts_max: int = 10          # attempts of one call while S3 throttles
    throttle_backoff_max_s: float = 5.0      # cap of one jittered wait
    throttle_deadline_s: float = 60.0        # no retry of a throttled call starts after this
    read_range_bytes: int = 1024 * 1024      # a row group is fetched in ranged GETs of at most this
    reads_in_flight_max: int = 8             # ranged GETs of cold reads running at once
    read_ahead_bytes_max: int = 16 * 1024 * 1024  # row-group bytes being fetched ahead of readers
    access_key: str | None = None  # None: boto3's credential chain
    secret_key: str | None = None

    @classmethod
    def from_config(cls, config: Config, *, access_key: str | None = None,
                    secret_key: str | None = None) -> S3Settings:
        return cls(endpoint=config.offload_s3_endpoint, region=config.offload_s3_region,
                   bucket=config.offload_s3_bucket, prefix=config.offload_s3_prefix.strip("/"),
                   connect_timeout_s=config.offload_s3_connect_timeout_ms / 1000,
                   read_timeout_s=config.offload_s3_read_timeout_ms / 1000,
                   part_bytes=config.offload_s3_part_bytes,
                   parts_in_flight_max=config.offload_s3_parts_in_flight_max,
                   row_group_bytes=config.offload_row_group_bytes,
                   read_ahead_row_groups_max=config.offload_read_ahead_row_groups_max,
                   read_cache_bytes_max=config.offload_read_cache_bytes_max,
                   open_objects_max=config.offload_open_objects_max,
                   throttle_attempts_max=config.offload_s3_throttle_attempts_max,
                   throttle_backoff_max_s=config.offload_s3_throttle_backoff_max_ms / 1000,
                   throttle_deadline_s=config.offload_s3_throttle_deadline_ms / 1000,
                   read_range_bytes=config.offload_s3_read_range_bytes,
                   reads_in_flight_max=config.offload_s3_reads_in_flight_max,
                   read_ahead_bytes_max=config.offload_read_ahead_bytes_max,
                   access_key=access_key, secret_key=secret_key)

    @property
    def io_threads(self) -> int:
        """Threads of the bucket's pool: every part in flight, every ranged GET, and a few for the rest."""
        return min(64, self.parts_in_flight_max + self.reads_in_flight_max + 4)


def translate(exc: BaseException, *, bucket: str, key: str | None = None, op: str = "") -> StrataError:
    """The cold-tier error for a botocore/boto3 (or socket) exception."""
    where: dict[str, object] = {"bucket": bucket, "op": op}
    if key is not None:
        where["key"] = key
    if isinstance(exc, StrataError):
        return exc
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = str(error.get("Message", "")) or code or str(status)
        where.update(s3_code=code, http_status=status)
        if code in _DENIED_CODES or status == 403:
            return ColdTierAccessDenied(f"S3 refused the credentials or the access: {message}", **where)
        if code == "NoSuchBucket" or (status == 404 and key is None):
            return ColdTierBucketMissing("S3 bucket does not exist", **where)
        if code in _MISSING_CODES or status == 404:
            return ColdObjectMissing("S3 object or upload does not exist", **where)
        if code == "InvalidRange" or status == 416:
            return ColdObjectCorrupt("object shorter than the range asked for", **where)
        if code in _UNAVAILABLE_CODES or status >= 500 or status == 429:
            return ColdTierUnavailable(f"S3 answered {status} {code}: {message}", **where)
        return ColdTierError(f"S3 refused the request: {code} {message}", **where)
    if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError):
        return ColdTierAccessDenied(f"no S3 credentials: {exc}", **where)
    if isinstance(exc, botocore.exceptions.ParamValidationError):
        return ColdTierError(f"bad S3 request (a bug): {exc}", **where)
    if isinstance(exc, botocore.exceptions.BotoCoreError | OSError):
        # cannot connect, timeouts, a dropped connection, a short body (IncompleteReadError)
        return ColdTierUnavailable(f"S3 unreachable: {type(exc).__name__}: {exc}", **where)
    return ColdTierError(f"unexpected error talking to S3: {type(exc).__name__}: {exc}", **where)


def content_range_total(content_range: str) -> int:
    """The object size from a `Content-Range: bytes a-b/total` header."""
    match = _CONTENT_RANGE.fullmatch(content_range.strip())
    if not match:
        raise ColdTierError("S3 sent no usable Content-Range", content_range=content_range)
    return int(match.group(3))


class S3Bucket:
    """One boto3 client bound to one bucket; async methods run the blocking calls in a bounded pool."""

    def __init__(self, settings: S3Settings, *, rng: random.Random | None = None) -> None:
        """rng: the jitter of throttled calls' waits (tests pass a seeded one)."""
        self.settings = settings
        self.bucket = settings.bucket
        self._rng = rng or random.Random()
        self._throttled = retry.Retry(
            "offload.s3_throttled", retry_on=ColdTierUnavailable, when=throttle.is_throttle,
            attempts_max=settings.throttle_attempts_max, deadline_s=settings.throttle_deadline_s,
            wait=throttle.full_jitter(throttle.BACKOFF_FIRST_S, settings.throttle_backoff_max_s),
            log_level=logging.INFO)
        client_config = botocore.config.Config(
            signature_version="s3v4", region_name=settings.region,
            connect_timeout=settings.connect_timeout_s, read_timeout=settings.read_timeout_s,
            retries={"total_max_attempts": BOTOCORE_ATTEMPTS_MAX, "mode": "standard"},
            max_pool_connections=settings.io_threads,
            s3={"addressing_style": "path" if settings.endpoint else "auto"})
        kwargs: dict[str, Any] = {"config": client_config, "region_name": settings.region}
        if settings.endpoint:
            kwargs["endpoint_url"] = settings.endpoint
        if settings.access_key is not None:
            kwargs["aws_access_key_id"] = settings.access_key
            kwargs["aws_secret_access_key"] = settings.secret_key
        self._client = boto3.session.Session().client("s3", **kwargs)
        self._pool = ThreadPoolExecutor(max_workers=settings.io_threads, thread_name_prefix="s3-io")
        self._closed = False

    # --- running blocking calls --------------------------------------------------------------

    def _translated(self, op: str, key: str | None, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:  # every foreign error becomes a cold-tier error here
            error = translate(exc, bucket=self.bucket, key=key, op=op)
            if throttle.is_throttle(error):
                throttle.count(op)
            raise error from exc

    async def run(self, op: str, key: str | None, fn: Callable[[], T], *, retried: bool = True) -> T:
        """`fn()` in the pool, its errors translated; retried on ColdTierUnavailable when
        `retried`: throttling under the throttle policy, the rest under `_S3_RETRY`."""
        if self._closed:
            raise ShuttingDown("S3 bucket client is closed", bucket=self.bucket)
        loop = asyncio.get_running_loop()
        call = functools.partial(self._translated, op, key, fn)

        async def once() -> T:
            return await loop.run_in_executor(self._pool, call)
        if not retried:
            return await once()
        about = f"{op} {key or self.bucket}"

        async def unthrottled() -> T:
            return await _S3_RETRY.call_async(once, about=about)
        return await self._throttled.call_async(unthrottled, rng=self._rng, about=about)

    # --- objects ------------------------------------------------------------------------------

    async def head(self, key: str) -> dict[str, Any]:
        """HEAD of an object: ContentLength, LastModified, Metadata (ColdObjectMissing if absent)."""
        return await self.run("head_object", key, lambda: self._client.head_object(Bucket=self.bucket, Key=key))

    async def get_range(self, key: str, first_byte: int, last_byte: int) -> bytes:
        """Bytes first_byte..last_byte (inclusive) of an object, whole or an error."""
        def get() -> bytes:
            answer = self._client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={first_byte}-{last_byte}")
            data = answer["Body"].read()
            if len(data) != last_byte - first_byte + 1:
                raise ColdObjectCorrupt("ranged GET returned the wrong length", key=key, first_byte=first_byte,
                                        last_byte=last_byte, got_bytes=len(data))
            return bytes(data)
        return await self.run("get_object", key, get)

    async def get_suffix(self, key: str, suffix_bytes: int) -> tuple[bytes, int]:
        """The last `suffix_bytes` of an object (all of it if shorter) and the object's size."""
        def get() -> tuple[bytes, int]:
            answer = self._client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=-{suffix_bytes}")
            data = bytes(answer["Body"].read())
            total = (content_range_total(answer["ContentRange"]) if answer.get("ContentRange")
                     else int(answer["ContentLength"]))
            if len(data) != min(suffix_bytes, total):
                raise ColdObjectCorrupt("suffix GET returned the wrong length", key=key, got_bytes=len(data),
                                        object_bytes=total)
            return data, total
        return await self.run("get_object", key, get)

    async def put(self, key: str, data: bytes, metadata: dict[str, str]) -> None:
        await self.run("put_object", key, lambda: self._client.put_object(
            Bucket=self.bucket, Key=key, Body=data, Metadata=metadata))

    async def delete(self, key: str) -> None:
        """Delete an object; deleting a missing one is fine (S3 answers 204 either way)."""
        await self.run("delete_object", key, lambda: self._client.delete_object(Bucket=self.bucket, Key=key))

    async def list_keys(self, prefix: str) -> list[str]:
        """Keys directly under `prefix` (delimiter "/": deeper "folders" are not listed)."""
        def list_all() -> list[str]:
            keys: list[str] = []
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
                keys.extend(str(item["Key"]) for item in page.get("Contents", []))
            return keys
        return await self.run("list_objects_v2", None, list_all)

    # --- multipart ----------------------------------------------------------------------------

    async def create_multipart(self, key: str, metadata: dict[str, str]) -> str:
        answer = await self.run("create_multipart_upload", key, lambda: self._client.create_multipart_upload(
            Bucket=self.bucket, Key=key, Metadata=metadata))
        return str(answer["UploadId"])

    async def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        """Upload one part (retried: a part may be sent again); its ETag."""
        answer = await self.run("upload_part", key, lambda: self._client.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=part_number, Body=data))
        return str(answer["ETag"])

    async def complete_multipart(self, key: str, upload_id: str, etags: list[str]) -> None:
        parts = [{"ETag": etag, "PartNumber": i + 1} for i, etag in enumerate(etags)]
        await self.run("complete_multipart_upload", key, lambda: self._client.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}))

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        """Abort an upload; one already gone is fine."""
        try:
            await self.run("abort_multipart_upload", key, lambda: self._client.abort_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id))
        except ColdObjectMissing:
            pass

    async def list_multipart(self, prefix: str) -> list[tuple[str, str]]:
        """(key, upload id) of the incomplete multipart uploads under `prefix`."""
        def list_all() -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []
            paginator = self._client.get_paginator("list_multipart_uploads")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                out.extend((str(u["Key"]), str(u["UploadId"])) for u in page.get("Uploads", []))
            return out
        return await self.run("list_multipart_uploads", None, list_all)

    # --- start-up check -----------------------------------------------------------------------

    async def check_access(self) -> None:
        """Raise ColdTierBucketMissing / ColdTierAccessDenied / ColdTierUnavailable unless this
        client can see the bucket and write and delete in it (a tiny probe object under the prefix)."""
        await self.run("head_bucket", None, lambda: self._client.head_bucket(Bucket=self.bucket))
        probe = "/".join(p for p in (self.settings.prefix, f"_probe/{uuid.uuid4().hex}") if p)
        await self.put(probe, b"strata access probe", {})
        await self.delete(probe)

    def close(self) -> None:
        """Stop taking calls; calls under way finish in their threads."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
