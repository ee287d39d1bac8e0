"""Calls on the broker that serves a topic: finding it, calling its admin API, deleting there.

A (partition) topic is served by the owner of its bundle. Work on a topic that may be served by
another broker (deleting a partition of a partitioned topic, its stats, a compaction) runs here
when this broker owns it, else is sent to the owner's admin HTTP API with this broker's own
credentials (`broker.security.peer_auth`); the owner authorizes the broker as a superuser, since
the call was already authorized where the client asked. Both front ends that change topics use
this: the admin REST API (`broker.admin.topics`, `broker.admin.lookup`) and the Kafka front end
(`broker.kafka.admin_topics`).

The broker is passed as a `PartitionHost` (what these calls need of it; `BrokerService` is one),
so this module sits below the service.

What must hold: a topic's data is only ever deleted by the broker that serves it (or by this one
when nobody serves it: nothing is loaded anywhere); a peer call never waits longer than
PEER_REQUEST_TIMEOUT_S and always carries this broker's credentials.
"""

from __future__ import annotations

import contextvars
import json
import ssl
from typing import TYPE_CHECKING, Protocol

import aiohttp
import yarl

from broker.cluster.ownership import LookupKind, ownership_path
from broker.records import policies
from broker.schemas import registry as schema_registry
from broker.security.peer_auth import peer_headers, peer_ssl
from common.config import Config
from common.errors import LeaseLost, NoOwner, NotAllowed, NotFound, ServiceNotReady
from common.topic_names import TopicName

if TYPE_CHECKING:
    from broker.cluster.identity import BrokerIdentity
    from broker.cluster.ownership import Ownership
    from common.clock import Clock
    from metadata.api import AsyncStore

PEER_REQUEST_TIMEOUT_S = 30.0     # one admin call forwarded to another broker
PEER_REDIRECTS_MAX = 5
# the settings `peer_call` takes this broker's credentials from when it is not given them: set for
# every admin request by `broker.admin.access.access` (tasks a handler starts inherit it)
PEER_CONFIG: contextvars.ContextVar[Config | None] = contextvars.ContextVar("peer_config", default=None)


class PartitionHost(Protocol):
    """What the calls on a topic's owner need of this broker."""

    config: Config
    astore: AsyncStore
    clock: Clock
    identity: BrokerIdentity
    ownership: Ownership

    async def delete_topic(self, name: TopicName, *, force: bool) -> None: ...


async def peer_call(http_url: str, method: str, path: str, query: dict[str, str] | None = None,
                    body: object = None, config: Config | None = None) -> tuple[int, object]:
    """An admin call on another broker (`authoritative=true`; `body` sent as JSON unless None),
    with this broker's credentials (from `config`, else `PEER_CONFIG`; `broker.security.peer_auth`),
    its 307/308s followed (at most PEER_REDIRECTS_MAX, credentials and body re-sent: aiohttp would
    drop the Authorization header on a redirect to another broker): (status, decoded JSON body or
    None; for an error status, the reason). Status 0 when it could not be reached or did not answer
    within PEER_REQUEST_TIMEOUT_S."""
    timeout = aiohttp.ClientTimeout(total=PEER_REQUEST_TIMEOUT_S)
    url = http_url.rstrip("/") + path
    params: dict[str, str] | None = {**(query or {}), "authoritative": "true"}
    config = config if config is not None else PEER_CONFIG.get()
    headers = peer_headers(config) if config is not None else {}
    ssl_ctx: ssl.SSLContext | bool = (peer_ssl(config) if config is not None else None) or True
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for _ in range(PEER_REDIRECTS_MAX + 1):
                async with session.request(method, url, params=params, headers=headers, json=body,
                                           ssl=ssl_ctx, allow_redirects=False) as resp:
                    status, text = resp.status, await resp.text()
                    location = resp.headers.get("Location", "")
                if status not in (307, 308) or not location:
                    break
                url, params = str(resp.url.join(yarl.URL(location))), None   # the Location has the query
    except (aiohttp.ClientError, TimeoutError) as exc:
        return 0, f"{url}: {exc or type(exc).__name__}"
    try:
        answer = json.loads(text) if text else None
    except ValueError:
        answer = text
    if status >= 300:
        reason = answer.get("reason", text) if isinstance(answer, dict) else text
        return status, f"{url}: HTTP {status}: {reason}"
    return status, answer


async def owner_elsewhere(service: PartitionHost, name: TopicName, *, assign: bool,
                          authoritative: bool = False) -> str | None:
    """The HTTP URL of the broker that serves `name`, or None when it is this one. With `assign`,
    an unowned bundle is assigned first (`Ownership.resolve`; NotAllowed "Can't find owner for
    topic <t>" if nobody can take it); without, an unowned topic counts as this broker's (there is
    nothing loaded anywhere). ServiceNotReady while starting or with the lease lapsed."""
    if not service.identity.web_url:
        raise ServiceNotReady("the broker is starting: not registered in the cluster yet")
    if assign:
        try:
            answer = await service.ownership.resolve(name, authoritative=authoritative)
        except NoOwner:
            raise NotAllowed(f"Can't find owner for topic {name}") from None     # 412
        except LeaseLost as exc:
            raise ServiceNotReady(str(exc)) from None                           # 503
        mine = answer.kind is LookupKind.CONNECT and answer.native_url == service.identity.service_url
        return None if mine else answer.http_url
    bundle = await service.ownership.bundle_of(name)
    owner = await service.ownership.owner_of(ownership_path(name.tenant, name.namespace, bundle))
    return None if owner is None or owner.mine else owner.http_url


async def delete_partition(service: PartitionHost, name: TopicName, *, force: bool) -> None:
    """Delete one (partition) topic and its data on the broker that serves it; a topic nothing
    ever stored is not an error."""
    url = await owner_elsewhere(service, name, assign=False)
    if url is None:
        try:
            await service.delete_topic(name, force=force)
        except NotFound:
            pass
        return
    status, body = await peer_call(url, "DELETE", f"/admin/v2/persistent/{name.path}",
                                   {"force": "true" if force else "false"}, config=service.config)
    if status == 412:
        raise NotAllowed(f"deleting {name} on its owner: {body}")
    if status not in (200, 204, 404):
        raise ServiceNotReady(f"deleting {name} on its owner: {body}")


async def delete_partitioned_topic(service: PartitionHost, name: TopicName, count: int, *, force: bool) -> None:
    """Delete a partitioned topic of `count` partitions: every partition on its owner, then its
    partition count, its topic policies and its schemas. Without `force`, NotAllowed when a
    partition's owner refuses because clients are attached (checked by the caller first)."""
    for i in range(count):   # on its owner; a partition nobody ever used has nothing stored
        await delete_partition(service, name.partition(i), force=force)
    await policies.delete_partitioned(service.astore, name)
    await policies.delete_topic_policies(service.astore, name)
    await schema_registry.forget_topic(service.astore, service.clock, name)
