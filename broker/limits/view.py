"""Each topic's effective value of a multi-tenant policy, cached.

    value = await view.value(topic_name, caps.MAX_PRODUCERS)        # topic > namespace > broker
    view.listen(callback)       # callback(match) after a policy change; match(TopicName) -> bool

A partitioned topic's policies are its base topic's. The namespace and topic policy documents
are read from the metadata store once and kept until the broker's watch on `/admin` says they
changed (`BrokerService._policy_changed` calls `changed`), so enforcing a policy on the produce
or subscribe path costs a dict lookup, not a store read. Listeners are told after the cache is
dropped, so they read the new values (e.g. a rate limiter re-reads its rate).

What must hold: after `changed(match)` returns, no cached document of a matching topic or
namespace remains; the view never holds more than `DOCS_MAX` documents (the oldest go first).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any

from broker.limits.spec import PolicySpec
from broker.records import policies
from common.config import Config
from common.topic_names import TopicName
from metadata.api import AsyncStore

log = logging.getLogger(__name__)

DOCS_MAX = 10_000
Match = Callable[[TopicName], bool]


class PolicyView:
    def __init__(self, astore: AsyncStore, config: Config) -> None:
        self._astore = astore
        self._config = config
        self._docs: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self._listeners: list[Callable[[Match], None]] = []
        self._generation = 0      # changes seen: a read that raced one is not kept

    async def value(self, name: TopicName, spec: PolicySpec) -> Any:
        """The topic's own value, else its namespace's, else the broker's."""
        if spec.topic_route is not None:
            own = (await self.topic_doc(name)).get(spec.key)
            if own is not None:
                return own
        return await self.namespace_value(name.tenant, name.namespace, spec)

    async def namespace_value(self, tenant: str, namespace: str, spec: PolicySpec) -> Any:
        """The namespace's value, else the broker's."""
        if spec.route is not None:
            found = (await self.namespace_doc(tenant, namespace)).get(spec.key)
            if found is not None:
                return found
        return spec.default(self._config)

    async def topic_doc(self, name: TopicName) -> dict:
        path = f"{policies.TOPIC_POLICIES_ROOT}/{name.base.path}"
        doc = self._docs.get(path)
        if doc is None:
            generation = self._generation
            doc = self._keep(path, await policies.topic_policies(self._astore, name), generation)
        return doc

    async def namespace_doc(self, tenant: str, namespace: str) -> dict:
        path = policies.namespace_path(tenant, namespace)
        doc = self._docs.get(path)
        if doc is None:
            generation = self._generation
            doc = self._keep(path, await policies.namespace_policies(self._astore, tenant, namespace), generation)
        return doc

    def listen(self, callback: Callable[[Match], None]) -> None:
        self._listeners.append(callback)

    def changed(self, path: str) -> None:
        """A policy document changed (its store path): drop it, tell the listeners."""
        self._generation += 1
        self._docs.pop(path, None)
        if path.startswith(policies.TOPIC_POLICIES_ROOT + "/"):
            base = path[len(policies.TOPIC_POLICIES_ROOT) + 1:]

            def match(n: TopicName) -> bool:
                return n.base.path == base
        elif path.startswith(policies.POLICIES_ROOT + "/"):
            tenant, _, ns = path[len(policies.POLICIES_ROOT) + 1:].partition("/")

            def match(n: TopicName) -> bool:
                return (n.tenant, n.namespace) == (tenant, ns)
        else:
            return
        for listener in list(self._listeners):
            try:
                listener(match)
            except Exception:                # one listener's bug must not stop the others
                log.exception("policy change listener failed for %s", path)

    def _keep(self, path: str, doc: dict, generation: int) -> dict:
        if generation != self._generation:
            return doc                       # a change arrived while reading: do not keep it
        self._docs[path] = doc
        while len(self._docs) > DOCS_MAX:
            self._docs.popitem(last=False)
        return doc
