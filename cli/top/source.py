"""Where `strata top`'s numbers come from: every live broker's `GET /admin/v2/broker-stats/topics`.

`fetch(admin_url, timeout_s)` asks `admin_url` for `/admin/v2/brokers` (entries are host:webPort,
each broker's admin address), then asks every broker in parallel for the stats of the topics it
serves, and merges the answers (`model.merge`). A broker that does not answer within `timeout_s`
(or answers an error) is counted as failed, not fatal. When the broker list itself cannot be read,
the admin URL is the only broker asked.

Credentials (`admin_client.Credentials` from `cli.admin.credentials`, `strata top`'s --auth-token
etc.) go with every request (`admin_client.request`); an https:// admin URL is verified with their
context, and the brokers listed are asked with the admin URL's scheme. A broker that refuses the
credentials (AdminUnauthorized / AdminForbidden) is not a failure to count but an answer to show:
the caller prints its reason.

What must hold: one fetch takes at most about `timeout_s` (+ the broker list's own `timeout_s`),
however many brokers hang; at most `PARALLEL_MAX` requests run at once; an answer is read up to
`ANSWER_BYTES_MAX`, and a larger one counts as a failure instead of filling memory.
"""

from __future__ import annotations

import ssl
from concurrent.futures import ThreadPoolExecutor, wait

from admin_client import NO_CREDENTIALS, Credentials, request
from cli.top.model import Snapshot, merge
from common.errors import AdminError, AdminForbidden, AdminUnauthorized, AdminUnreachable

BROKERS_PATH = "/admin/v2/brokers"
TOPICS_PATH = "/admin/v2/broker-stats/topics"
PARALLEL_MAX = 16                       # brokers asked at once
ANSWER_BYTES_MAX = 256 * 1024 * 1024    # the largest broker-stats answer read
REFUSED = (AdminUnauthorized, AdminForbidden)


def get_json(url: str, timeout_s: float, credentials: Credentials = NO_CREDENTIALS) -> object:
    """GET `url` and decode its JSON; AdminError on any failure (AdminUnauthorized / AdminForbidden
    when the credentials are refused)."""
    return request("GET", url, credentials=credentials, timeout_s=timeout_s,
                   answer_bytes_max=ANSWER_BYTES_MAX).json()


def broker_urls(admin_url: str, timeout_s: float, credentials: Credentials = NO_CREDENTIALS) -> list[str]:
    """The admin URLs of the live brokers (scheme://host:webPort, the admin URL's scheme);
    [admin_url] if the list cannot be read; AdminUnauthorized / AdminForbidden when the credentials
    are refused; AdminUnreachable when the broker's certificate fails the check."""
    base = admin_url.rstrip("/")
    scheme = base.split("://", 1)[0] if "://" in base else "http"
    try:
        entries = get_json(base + BROKERS_PATH, timeout_s, credentials)
    except REFUSED:
        raise
    except AdminUnreachable as exc:
        if isinstance(exc.cause, ssl.SSLCertVerificationError):
            raise                          # retrying will not help: the caller says why
        return [base]
    except (AdminError, ValueError):
        return [base]
    if not isinstance(entries, list) or not entries:
        return [base]
    return sorted({e if "://" in e else f"{scheme}://{e}" for e in entries if isinstance(e, str)}) or [base]


def _topics_of(url: str, timeout_s: float, credentials: Credentials = NO_CREDENTIALS) -> object | None:
    try:
        return get_json(url + TOPICS_PATH, timeout_s, credentials)
    except (AdminError, ValueError):
        return None


def gather(urls: list[str], timeout_s: float, credentials: Credentials = NO_CREDENTIALS) -> Snapshot:
    """Ask every broker of `urls` at once; those without an answer after `timeout_s` count as failed."""
    answers: dict[str, object | None] = dict.fromkeys(urls)
    if not urls:
        return merge(answers)
    pool = ThreadPoolExecutor(max_workers=min(PARALLEL_MAX, len(urls)), thread_name_prefix="strata-top")
    try:
        futures = {pool.submit(_topics_of, url, timeout_s, credentials): url for url in urls}
        done, _ = wait(futures, timeout=timeout_s + 0.5)
        for future in done:
            answers[futures[future]] = future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return merge(answers)


def fetch(admin_url: str, timeout_s: float, credentials: Credentials = NO_CREDENTIALS) -> Snapshot:
    """One snapshot of the whole cluster (see the module docstring); AdminUnauthorized /
    AdminForbidden when the broker refuses the credentials."""
    return gather(broker_urls(admin_url, timeout_s, credentials), timeout_s, credentials)
