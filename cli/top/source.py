"""Where `strata top`'s numbers come from: every live broker's `GET /admin/v2/broker-stats/topics`.

`fetch(admin_url, timeout_s)` asks `admin_url` for `/admin/v2/brokers` (entries are host:webPort,
each broker's admin address), then asks every broker in parallel for the stats of the topics it
serves, and merges the answers (`model.merge`). A broker that does not answer within `timeout_s`
(or answers an error) is counted as failed, not fatal. When the broker list itself cannot be read,
the admin URL is the only broker asked.

Credentials (`cli.admin.credentials.HttpAuth`, `strata top`'s --auth-token etc.) go with every
request; an https:// admin URL is verified with its context, and the brokers listed are asked
with the admin URL's scheme. A broker that refuses the credentials (401/403) is not a failure to
count but an answer to show: `Refused` carries its reason.

What must hold: one fetch takes at most about `timeout_s` (+ the broker list's own `timeout_s`),
however many brokers hang; at most `PARALLEL_MAX` requests run at once; an answer is read up to
`ANSWER_BYTES_MAX`, and a larger one counts as a failure instead of filling memory.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, wait

from cli.admin.client import opener
from cli.admin.credentials import NO_AUTH, HttpAuth
from cli.top.model import Snapshot, merge

BROKERS_PATH = "/admin/v2/brokers"
TOPICS_PATH = "/admin/v2/broker-stats/topics"
PARALLEL_MAX = 16                       # brokers asked at once
ANSWER_BYTES_MAX = 256 * 1024 * 1024    # the largest broker-stats answer read


class Refused(Exception):
    """The broker refused the credentials (401) or the role (403): `reason` is what it said."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


def _refused(exc: urllib.error.HTTPError) -> Refused:
    try:
        reason = str(json.loads(exc.read() or b"{}").get("reason", exc.reason))
    except (ValueError, AttributeError):
        reason = str(exc.reason)
    return Refused(exc.code, reason)


def get_json(url: str, timeout_s: float, auth: HttpAuth = NO_AUTH) -> object:
    """GET `url` and decode its JSON; Refused on 401/403, OSError / ValueError on any other failure."""
    request = urllib.request.Request(url, headers=auth.headers)
    try:
        with opener(auth).open(request, timeout=timeout_s) as resp:
            raw = resp.read(ANSWER_BYTES_MAX + 1)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise _refused(exc) from None
        raise
    if len(raw) > ANSWER_BYTES_MAX:
        raise ValueError(f"{url}: answer larger than {ANSWER_BYTES_MAX} bytes")
    return json.loads(raw)


def broker_urls(admin_url: str, timeout_s: float, auth: HttpAuth = NO_AUTH) -> list[str]:
    """The admin URLs of the live brokers (scheme://host:webPort, the admin URL's scheme);
    [admin_url] if the list cannot be read; Refused when the credentials are; URLError when the
    broker's certificate fails the check."""
    base = admin_url.rstrip("/")
    scheme = base.split("://", 1)[0] if "://" in base else "http"
    try:
        entries = get_json(base + BROKERS_PATH, timeout_s, auth)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):
            raise                          # retrying will not help: the caller says why
        return [base]
    except (OSError, ValueError):
        return [base]
    if not isinstance(entries, list) or not entries:
        return [base]
    return sorted({e if "://" in e else f"{scheme}://{e}" for e in entries if isinstance(e, str)}) or [base]


def _topics_of(url: str, timeout_s: float, auth: HttpAuth = NO_AUTH) -> object | None:
    try:
        return get_json(url + TOPICS_PATH, timeout_s, auth)
    except (OSError, ValueError, Refused):
        return None


def gather(urls: list[str], timeout_s: float, auth: HttpAuth = NO_AUTH) -> Snapshot:
    """Ask every broker of `urls` at once; those without an answer after `timeout_s` count as failed."""
    answers: dict[str, object | None] = dict.fromkeys(urls)
    if not urls:
        return merge(answers)
    pool = ThreadPoolExecutor(max_workers=min(PARALLEL_MAX, len(urls)), thread_name_prefix="strata-top")
    try:
        futures = {pool.submit(_topics_of, url, timeout_s, auth): url for url in urls}
        done, _ = wait(futures, timeout=timeout_s + 0.5)
        for future in done:
            answers[futures[future]] = future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return merge(answers)


def fetch(admin_url: str, timeout_s: float, auth: HttpAuth = NO_AUTH) -> Snapshot:
    """One snapshot of the whole cluster (see the module docstring); Refused when the broker
    refuses the credentials."""
    return gather(broker_urls(admin_url, timeout_s, auth), timeout_s, auth)
