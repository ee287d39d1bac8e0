"""The Spark source honours the cluster's authorization: it reads the metadata store, bookies and
S3 directly, past every broker check, so before it lists a topic's ledgers it asks the broker,
with the query's credentials, whether the role may consume that topic.

    gate = TopicGate.of_store(store, access)     # the cluster's /admin/security record decides
    gate.require(["persistent://a/ns/x"])        # SourceAccessDenied unless the role may consume each
    names = gate.readable(candidates)            # a topicsPattern: the topics it may not read dropped

    admin_get(access, url)                       # GET with the credentials and TLS trust (every admin call)
    pulsar_client_kwargs(access)                 # authentication= / tls_trust_certs_file_path= for pulsar.Client

How: the record (`common.security_records`) says whether authorization is on. If it is off,
nothing is asked. If it is on, the query must carry credentials and `admin.url`, and each topic
is checked with `GET /admin/v2/persistent/<topic>/internalStats`, which the broker's admin access
table makes a consume route (the same call analytics/snapshot.py makes for the last confirmed
entry): 401/403 refuse; 200 and 404 (allowed, no such topic: the metadata store then says
TopicNotFound) admit; anything else (broker unreachable, 5xx) refuses too, as a failure to check.

What must hold: an explicitly named topic is checked before the metadata store is asked whether it
exists, and a refusal's message is the same for a topic that exists and one that does not (the
broker's 403 never depends on it either); a pattern drops the topics it may not read and logs
only how many; credentials and secrets never appear in a message or a log line. Runs on the
driver only (planning), never in a partition.
"""

from __future__ import annotations

import base64
import logging
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from analytics.access import ClusterAccess
from common import security_records
from common.errors import SourceAccessDenied
from common.topic_names import TopicName, parse_topic

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 10.0
NEEDS_CREDENTIALS = ("the cluster enforces authorization: give the query credentials (option token, or "
                     "pulsar.client.authPluginClassName with pulsar.client.authParams, or STRATA_AUTH_TOKEN) "
                     "and admin.url, the broker that checks them")


def _denied(topic: str) -> SourceAccessDenied:
    return SourceAccessDenied("not authorized to consume this topic (or it does not exist)", topic=topic)


# ------------------------------------------------------------------------------------------------
# Admin HTTP with the query's credentials


def http_headers(access: ClusterAccess) -> dict[str, str]:
    """The Authorization header of token and basic credentials (TLS credentials go in the handshake)."""
    if access.auth_method == "token":
        return {"Authorization": f"Bearer {access.auth_secret}"}
    if access.auth_method == "basic":
        return {"Authorization": "Basic " + base64.b64encode(access.auth_secret.encode()).decode()}
    return {}


def ssl_context(access: ClusterAccess) -> ssl.SSLContext:
    """Trust: the query's CA file, else the system's; the client certificate of TLS credentials."""
    from auth.tls import client_context

    if access.tls_trust_file:
        return client_context(access.tls_trust_file, cert_file=access.tls_cert_file, key_file=access.tls_key_file)
    ctx = ssl.create_default_context()
    if access.tls_cert_file:
        ctx.load_cert_chain(access.tls_cert_file, access.tls_key_file)
    return ctx


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Follows a broker's 307 to a topic's owner (credentials kept), but never from https:// to
    plain http://, where the credentials would travel in clear."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if req.full_url.startswith("https://") and not newurl.startswith("https://"):
            raise urllib.error.HTTPError(req.full_url, code, "redirect from https:// to plain http:// refused",
                                         headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def admin_get(access: ClusterAccess, url: str, timeout_s: float = CHECK_TIMEOUT_S, limit_bytes: int = -1) -> bytes:
    """The body of GET `url` (an admin API URL) sent with the query's credentials and TLS trust.
    urllib's errors (HTTPError with .code, URLError, OSError) pass through to the caller."""
    request = urllib.request.Request(url, headers=http_headers(access))
    handlers: list[Any] = [_NoDowngrade()]
    if url.startswith("https://"):
        handlers.append(urllib.request.HTTPSHandler(context=ssl_context(access)))
    with urllib.request.build_opener(*handlers).open(request, timeout=timeout_s) as response:
        return bytes(response.read(limit_bytes))


def pulsar_client_kwargs(access: ClusterAccess) -> dict[str, Any]:
    """`pulsar.Client(url, **kwargs)`: the query's credentials and trust for the official client."""
    import pulsar

    kwargs: dict[str, Any] = {}
    if access.auth_method == "token":
        kwargs["authentication"] = pulsar.AuthenticationToken(access.auth_secret)
    elif access.auth_method == "basic":
        user, _, password = access.auth_secret.partition(":")
        kwargs["authentication"] = pulsar.AuthenticationBasic(user, password)
    elif access.auth_method == "tls":
        kwargs["authentication"] = pulsar.AuthenticationTLS(access.tls_cert_file, access.tls_key_file)
    if access.tls_trust_file:
        kwargs["tls_trust_certs_file_path"] = access.tls_trust_file
    return kwargs


def topic_url(admin_url: str, topic: TopicName, suffix: str) -> str:
    parts = (topic.tenant, topic.namespace, topic.local)
    return (f"{admin_url.rstrip('/')}/admin/v2/{'persistent' if topic.persistent else 'non-persistent'}/"
            + "/".join(urllib.parse.quote(p, safe="") for p in parts) + suffix)


# ------------------------------------------------------------------------------------------------
# The gate


@dataclass(frozen=True)
class TopicGate:
    access: ClusterAccess
    enforced: bool                 # the cluster's record says authorization is on

    @classmethod
    def of_store(cls, store: Any, access: ClusterAccess) -> TopicGate:
        """The gate of the cluster whose metadata store `store` is; SourceAccessDenied at once if
        it enforces authorization and the query has no credentials or no admin.url."""
        enforced = security_records.read(store).authorization_enabled
        if enforced and (not access.has_credentials or not access.admin_url):
            raise SourceAccessDenied(NEEDS_CREDENTIALS)
        return cls(access, enforced)

    def may_consume(self, topic: TopicName) -> bool:
        """The broker's answer for this role and topic (True when nothing is enforced)."""
        if not self.enforced:
            return True
        try:
            admin_get(self.access, topic_url(self.access.admin_url, topic, "/internalStats"), limit_bytes=0)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return True            # the check passed; whether it exists is the store's answer
            if exc.code not in (401, 403):
                log.warning("the broker could not check access to a topic (HTTP %d); refused", exc.code)
            return False
        except (urllib.error.URLError, OSError, ssl.SSLError, ValueError) as exc:
            log.warning("the broker could not check access to a topic (%s); refused", type(exc).__name__)
            return False
        return True

    def require(self, topics: Iterable[str | TopicName]) -> None:
        """SourceAccessDenied for the first topic the role may not consume (the name as given)."""
        for topic in topics:
            name = topic if isinstance(topic, TopicName) else parse_topic(topic)
            if not self.may_consume(name):
                raise _denied(str(topic))

    def readable(self, names: Sequence[TopicName]) -> list[TopicName]:
        """The names the role may consume; how many were dropped is logged, not which."""
        if not self.enforced:
            return list(names)
        verdicts: dict[str, bool] = {}      # by base name: a partitioned topic's partitions share it
        kept = []
        for name in names:
            base = str(name.base)
            if base not in verdicts:
                verdicts[base] = self.may_consume(name)
            if verdicts[base]:
                kept.append(name)
        if len(kept) < len(names):
            log.info("topicsPattern: %d of %d matching topic(s) left out: this role may not consume them",
                     len(names) - len(kept), len(names))
        return kept
