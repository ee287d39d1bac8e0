"""A throttled S3: what counts as throttling, how long to back off, and how often it happened.

S3 (and MinIO, SeaweedFS, Ceph RGW) answer a client going faster than a key prefix allows with
`503 SlowDown` (or `429`, `Throttling`, `RequestLimitExceeded`, ...). The answer is to slow
down: `offload.s3` retries a throttled call under its own policy (`S3Bucket`'s), with
exponential backoff and full jitter (`full_jitter`: uniform in [0, min(cap, first * 2^n)], so
concurrent part uploads and ranged GETs that were throttled together do not come back together),
bounded by attempts and by time (`offload_s3_throttle_attempts_max`,
`offload_s3_throttle_deadline_ms`, `offload_s3_throttle_backoff_max_ms`).

Every throttled answer is counted here, per S3 operation (`THROTTLED`), and exported by the
broker as `strata_offload_s3_throttled_total{op}`; the retries themselves are also in
`strata_retries_total{op="offload.s3_throttled"}` (common.retry), and calls that stayed
throttled past the bound in `strata_retries_exhausted_total`.

This module imports neither boto3 nor pyarrow: the broker's metrics read it without loading the
cold tier. What must hold: the counters only go up; `full_jitter` never waits more than its cap.
"""

from __future__ import annotations

import random
import threading

from common.errors import ColdTierUnavailable
from common.retry import Wait

THROTTLE_CODES = frozenset(("SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
                            "TooManyRequests", "RequestThrottled", "ServiceUnavailable"))
THROTTLE_STATUSES = frozenset((429, 503))
BACKOFF_FIRST_S = 0.05            # the first wait's cap; it doubles with each throttled attempt

THROTTLED: dict[str, int] = {}    # S3 operation (get_object, upload_part, ...) -> throttled answers
_lock = threading.Lock()          # bumped from the bucket's worker threads


def is_throttle(exc: BaseException) -> bool:
    """True for a ColdTierUnavailable that is S3 asking us to slow down (offload.s3.translate
    puts the S3 code and HTTP status in the details)."""
    if not isinstance(exc, ColdTierUnavailable):
        return False
    return exc.details.get("s3_code") in THROTTLE_CODES or exc.details.get("http_status") in THROTTLE_STATUSES


def count(op: str) -> None:
    with _lock:
        THROTTLED[op] = THROTTLED.get(op, 0) + 1


def snapshot() -> dict[str, int]:
    with _lock:
        return dict(THROTTLED)


def full_jitter(first_s: float, max_s: float) -> Wait:
    """A common.retry wait: uniform in [0, min(max_s, first_s * 2^(attempt-1))] from the policy's rng."""
    def wait(attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(max_s, first_s * 2 ** min(attempt - 1, 62)))
    return wait
