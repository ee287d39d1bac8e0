"""The Spark source honours the cluster's authorization: it reads the metadata store, bookies and
S3 directly, past every broker check, so before it lists a topic's ledgers it asks the broker,
with the query's credentials, whether the role may consume that topic.

    gate = TopicGate.of_store(store, access)     # the cluster's /admin/security record decides
    gate.require(["persistent://a/ns/x"])        # SourceAccessDenied unless the role may consume each
    names = gate.readable(candidates)            # a topicsPattern: the topics it may not read dropped

    admin_get(access, url)                       # GET with the credentials and TLS trust (admin_client)
    pulsar_client_kwargs(access)                 # authentication= / tls_trust_certs_file_path= for pulsar.Client

How: the record (`common.security_records`) says whether authorization is on. If it is off,
nothing is asked. If it is on, the query must carry credentials and `admin.url`, and each topic
is checked with `GET /admin/v2/persistent/<topic>/internalStats`, which the broker's admin access
table makes a consume route (the same call analytics/snapshot.py makes for the last confirmed
entry): 401/403 refuse; 200 and 404 (allowed, no such topic: the metadata store then says
TopicNotFound) admit; anything else (broker unreachable, 5xx) refuses too, as a failure to check.
Every admin call goes through `admin_client` (its redirect rule: a 307 to the topic's owner is
followed, credentials kept, but never from https:// to plain http:// while they would be sent;
its typed errors).

What must hold: an explicitly named topic is checked before the metadata store is asked whether it
exists, and a refusal's message is the same for a topic that exists and one that does not (the
broker's 403 never depends on it either); a pattern drops the topics it may not read and logs
only how many; credentials and secrets never appear in a message or a log line. Runs on the
driver only (planning), never in a partition.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from admin_client import ANSWER_BYTES_MAX, Credentials, request
from analytics.access import ClusterAccess
from common import security_records
from common.errors import (
    AdminForbidden,
    AdminHttpError,
    AdminNotFound,
    AdminUnauthorized,
    SourceAccessDenied,
    StrataError,
)
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


def admin_credentials(access: ClusterAccess, url: str) -> Credentials:
    """The query's credentials for `url`: the Authorization header of token and basic credentials;
    for an https:// URL also the trust file and the client certificate of TLS credentials (an
    http:// URL never needs, so never loads, the TLS files). InvalidArgument / KeyMaterialError
    when a TLS file cannot be used."""
    https = urllib.parse.urlsplit(url).scheme.lower() == "https"
    trust, cert, key = (access.tls_trust_file, access.tls_cert_file, access.tls_key_file) if https else ("", "", "")
    token = access.auth_secret if access.auth_method == "token" else ""
    user, _, password = access.auth_secret.partition(":")
    basic = (user, password) if access.auth_method == "basic" else None
    return Credentials.build(token=token, basic=basic, cert_file=cert, key_file=key, trust_file=trust)


def admin_get(access: ClusterAccess, url: str, timeout_s: float = CHECK_TIMEOUT_S,
              limit_bytes: int = ANSWER_BYTES_MAX, *, read_body: bool = True) -> bytes:
    """The body of GET `url` (an admin API URL) sent with the query's credentials and TLS trust, at
    most `limit_bytes` of it (not read at all with read_body=False). admin_client's typed errors
    (AdminNotFound, AdminForbidden, AdminUnreachable, AdminAnswerTooLarge, ...) reach the caller."""
    return request("GET", url, credentials=admin_credentials(access, url), timeout_s=timeout_s,
                   answer_bytes_max=limit_bytes, read_body=read_body).body


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
            admin_get(self.access, topic_url(self.access.admin_url, topic, "/internalStats"), read_body=False)
        except AdminNotFound:
            return True                # the check passed; whether it exists is the store's answer
        except (AdminUnauthorized, AdminForbidden):
            return False
        except AdminHttpError as exc:
            log.warning("the broker could not check access to a topic (HTTP %d); refused", exc.status)
            return False
        except (StrataError, ValueError) as exc:
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
