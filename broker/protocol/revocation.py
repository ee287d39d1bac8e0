"""Revocation: producers and consumers whose permission was taken away are closed by the broker.

A permission is checked when a producer or consumer is created (`broker.security.authorization`). With
authorization on, every `authorization_recheck_interval_ms` a pass re-checks every producer and
consumer this broker serves (persistent and non-persistent topics) against the permissions as
stored now, as Pulsar's brokers do when a namespace's policies change:
- clients are grouped by namespace: one fresh read of the namespace's grants (policies and its
  tenant's adminRoles) per namespace per pass, then each client is decided in memory;
- a producer no longer allowed to produce is quiesced (SENDs arriving from then on are dropped
  unanswered, never stored), its appends in flight get their receipts (at most
  `_SETTLE_S`), then it is removed and sent CLOSE_PRODUCER; a consumer no longer allowed to
  consume (on its subscription) is sent CLOSE_CONSUMER and detached at once, so nothing more is
  dispatched to it. The client re-creates it, and that PRODUCER / SUBSCRIBE is refused with
  AuthorizationError (the same path topic unloads take); a topic-list watcher (WATCH_TOPIC_LIST)
  whose role may no longer list the namespace is dropped: no WATCH_TOPIC_UPDATE is sent to it any
  more (the protocol has no server-side close of a watcher; the client's next GET_TOPICS_OF_NAMESPACE
  or WATCH_TOPIC_LIST is refused until a re-grant);
- bounded work: at most `_NAMESPACES_PER_PASS_MAX` namespaces are read per pass (the next pass
  goes on from there), and the pass yields to the event loop every `_CLIENTS_PER_YIELD` clients.

A superuser's clients, and links without a role (the broker's own), are never closed. A read that
fails leaves that namespace's clients alone until the next pass. So a revoke takes effect on
existing clients within one interval (plus a pass), and on new ones at once
(`AuthorizationService` never refuses from memory, and remembers a grant at most its cache TTL,
shorter than the interval).

What must hold: nothing is closed while authorization is off; a client allowed by the stored
permissions is never closed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.security.authorization import Action, NamespaceGrants
from common.errors import StrataError

if TYPE_CHECKING:
    from broker.protocol.frontend import FrontEnd

log = logging.getLogger(__name__)

_NAMESPACES_PER_PASS_MAX = 1_000
_CLIENTS_PER_YIELD = 500
_SETTLE_S = 2.0          # a revoked producer's appends in flight get this long for their receipts


@dataclass
class _Clients:
    """One namespace's producers (topic, producer), consumers (topic, subscription, consumer) and
    topic-list watchers."""

    producers: list[tuple[Any, Any]] = field(default_factory=list)
    consumers: list[tuple[Any, Any, Any]] = field(default_factory=list)
    watchers: list[Any] = field(default_factory=list)


def _role(link: object) -> str | None:
    return getattr(link, "role", None)


def collect(front: FrontEnd) -> dict[tuple[str, str], _Clients]:
    """Every producer and consumer with a role, by (tenant, namespace) (synchronous: a snapshot)."""
    found: dict[tuple[str, str], _Clients] = {}
    topics: list[Any] = list(front.service.topics.values()) + list(front.non_persistent.topics.values())
    for topic in topics:
        clients = found.setdefault((topic.name.tenant, topic.name.namespace), _Clients())
        for producer in list(topic.producers.values()):
            if _role(producer.link) is not None and not producer.closed:
                clients.producers.append((topic, producer))
        for sub in list(topic.subscriptions.values()):
            for consumer in list(sub.consumers):
                if _role(consumer.link) is not None and not consumer.closed:
                    clients.consumers.append((topic, sub, consumer))
    for watcher in front.topic_lists.all():
        if _role(watcher.conn) is not None:
            found.setdefault((watcher.tenant, watcher.namespace), _Clients()).watchers.append(watcher)
    return {key: c for key, c in found.items() if c.producers or c.consumers or c.watchers}


class AuthzRecheck:
    """The periodic pass (see the module docstring)."""

    def __init__(self, front: FrontEnd) -> None:
        self.front = front
        self._next = 0      # where the next pass starts among the sorted namespaces

    async def run(self) -> None:
        """Pass after pass until the service closes; returns at once when authorization is off."""
        authz = self.front.authorization
        if not authz.enabled:
            return
        interval_s = self.front.ctx.config.authorization_recheck_interval_ms / 1000
        while not self.front.service.closing:
            await asyncio.sleep(interval_s)
            try:
                await self.run_pass()
            except StrataError as exc:
                log.warning("authorization recheck pass failed: %s", exc)
            except Exception:   # a bug must not end revocation for the broker's lifetime
                log.exception("authorization recheck pass crashed; the next pass runs as usual")

    async def run_pass(self) -> int:
        """One pass; returns how many producers, consumers and topic-list watchers it closed."""
        authz = self.front.authorization
        if not authz.enabled:
            return 0
        by_namespace = collect(self.front)
        keys = sorted(by_namespace)
        if len(keys) > _NAMESPACES_PER_PASS_MAX:
            start = self._next % len(keys)
            keys = (keys[start:] + keys[:start])[:_NAMESPACES_PER_PASS_MAX]
            self._next = start + _NAMESPACES_PER_PASS_MAX
        closed, checked = 0, 0
        for tenant, namespace in keys:
            try:
                grants = await authz.grants(tenant, namespace, fresh=True)
            except StrataError as exc:
                log.warning("authorization recheck of %s/%s skipped: %s", tenant, namespace, exc)
                continue
            clients = by_namespace[(tenant, namespace)]
            closed += await self._check(grants, clients)
            checked += len(clients.producers) + len(clients.consumers) + len(clients.watchers)
            if checked >= _CLIENTS_PER_YIELD:
                checked = 0
                await asyncio.sleep(0)
        return closed

    async def _check(self, grants: NamespaceGrants, clients: _Clients) -> int:
        authz = self.front.authorization
        revoked = [(topic, producer) for topic, producer in clients.producers
                   if not authz.permits(grants, _role(producer.link), Action.PRODUCE, topic.name)]
        consumers = [(topic, sub, consumer) for topic, sub, consumer in clients.consumers
                     if not authz.permits(grants, _role(consumer.link), Action.CONSUME, topic.name, sub.name)]
        watchers = [w for w in clients.watchers if not authz.permits_namespace(grants, _role(w.conn))]
        for topic, sub, consumer in consumers:
            close_consumer(topic, sub, consumer)
        for watcher in watchers:
            log.info("topic-list watcher %d of %s/%s (role %r) is no longer authorized: dropping it",
                     watcher.watcher_id, watcher.tenant, watcher.namespace, _role(watcher.conn))
            self.front.topic_lists.remove(watcher)
        if revoked:
            await close_producers(revoked)
        return len(revoked) + len(consumers) + len(watchers)


def close_consumer(topic: Any, sub: Any, consumer: Any) -> None:
    if consumer.closed:
        return
    log.info("consumer %s of %s/%s (role %r) is no longer authorized to consume: closing it",
             consumer.name, topic.name, sub.name, _role(consumer.link))
    consumer.close_by_broker()      # CLOSE_CONSUMER; the connection forgets it
    sub.remove_consumer(consumer)   # nothing more is dispatched to it


async def close_producers(revoked: list[tuple[Any, Any]]) -> None:
    """Quiesce, let appends in flight settle (bounded), then remove and send CLOSE_PRODUCER."""
    for _, producer in revoked:
        producer.quiesce()
    try:
        await asyncio.wait_for(asyncio.gather(*(p.settled() for _, p in revoked)), _SETTLE_S)
    except TimeoutError:
        log.warning("revoked producers: receipts still pending after %.1f s; closing anyway", _SETTLE_S)
    for topic, producer in revoked:
        log.info("producer %s of %s (role %r) is no longer authorized to produce: closing it",
                 producer.name, topic.name, _role(producer.link))
        topic.remove_producer(producer)
        producer.close_by_broker()
