"""Load management: leader election, load shedding and automatic bundle splits.

Leader: the broker holding the ephemeral key `/loadbalance/leader` (`{"brokerId", "serviceUrl",
"webServiceUrl"}`). Every broker tries to create it at start and again whenever it goes; the
key vanishes with its holder's session, so a dead leader is replaced within the lease.

Shedding (leader only, every `broker_load_shedding_interval_ms`): each live broker's load score
(`load_placement.load_score`: bundles owned, message rate, CPU) is compared. The busiest broker
(highest score) owning two or more bundles is asked to unload one bundle to the least-loaded one
(lowest score) when
- it is at least two bundles' worth of score above it (so one move narrows the gap and never
  swaps it: no ping-pong), and
- it is above `broker_load_shedding_ratio_max` × the cluster average (load well above the rest),
  or it owns at least two bundles more (bundle counts even out to within one: 8/0 ends at 4/4,
  where the threshold alone would stop at 5/3, 25 % above the average of 4).
The unload is the owner's admin `PUT .../{bundle}/unload?destinationBroker=` (the leader's own
bundles are unloaded directly). Until a client's lookup makes the destination acquire it, a shed
bundle counts as the destination's (`_pending`), so the next pass does not see it as gone and shed
another one into the same gap. A bundle moved by shedding is not moved again for `_GRACE_PASSES`
passes.

Splitting (every broker, its own bundles, same interval, when `broker_bundle_auto_split`): a
bundle holding more than `broker_bundle_split_topics_max` loaded topics, or more than
`broker_bundle_split_msg_rate_max` msg/s in + out, is split in two (range_equally_divide).

What must hold: at most one leader at a time (the key's compare-and-set); a pass that fails
(a broker unreachable, a lost race) changes nothing and is simply tried again next time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

import aiohttp

from broker.cluster.ownership import HINT_TTL_MS, NAMESPACE_ROOT
from broker.cluster.placement import load_score
from broker.records import bundles as bundle_math
from broker.security.peer_auth import peer_headers, peer_ssl
from broker.topics.rates import out_rates, rates
from common.errors import AlreadyExists, StrataError
from metadata.api import EventKind, Watch, WatchEvent

if TYPE_CHECKING:
    from broker.cluster.identity import BrokerIdentity
    from broker.cluster.ownership import Ownership
    from broker.cluster.registry import BrokerInfo, BrokerRegistry
    from broker.context import BrokerContext

log = logging.getLogger(__name__)

LEADER_PATH = "/loadbalance/leader"
_GRACE_PASSES = 5
_UNLOAD_CALL_TIMEOUT_S = 30.0


class LoadManager:
    def __init__(self, ctx: BrokerContext, identity: BrokerIdentity, registry: BrokerRegistry,
                 ownership: Ownership) -> None:
        self._ctx = ctx
        self._identity = identity
        self._registry = registry
        self._ownership = ownership
        self._stopped = False                # the broker is stopping: no more passes or elections
        self.is_leader = False
        self._leader: dict | None = None
        self._watch: Watch | None = None
        self._recently_moved: dict[str, int] = {}     # "t/ns/0x.._0x.." -> pass number it moved at
        # shed, not yet acquired: ownership path -> (source URL, destination URL, monotonic expiry)
        self._pending: dict[str, tuple[str, str, float]] = {}
        self._pass = 0

    # --- leader ------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._watch = await self._ctx.astore.watch(LEADER_PATH, self._leader_changed)
        await self.elect()
        self._ctx.spawn(self._loop())

    def stop(self) -> None:
        self._stopped = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _leader_changed(self, event: WatchEvent) -> None:
        if event.kind is EventKind.DELETED:
            self._leader = None
            self.is_leader = False
            if not self._stopped and not self._ownership.draining:
                self._ctx.spawn(self.elect())
        elif event.value is not None:
            self._leader = json.loads(event.value.decode())

    async def elect(self) -> None:
        """Become leader if nobody is; learn who is otherwise."""
        me = {"brokerId": self._identity.registry_key, "serviceUrl": self._identity.service_url,
              "webServiceUrl": self._identity.web_url}
        astore = self._ctx.astore
        try:
            await astore.create(LEADER_PATH, json.dumps(me).encode(), ephemeral=True)
            self.is_leader, self._leader = True, me
            log.info("this broker is the leader")
            return
        except AlreadyExists:
            pass
        except StrataError as exc:
            log.warning("leader election: %s", exc)
            return
        found = await astore.get(LEADER_PATH)
        if found is None:
            return
        self._leader = json.loads(found.value.decode())
        self.is_leader = found.ephemeral_owner == astore.session_id

    async def leader(self) -> dict | None:
        """The current leader's `{"brokerId", "serviceUrl", "webServiceUrl"}`, or None."""
        if self._leader is None:
            found = await self._ctx.astore.get(LEADER_PATH)
            self._leader = json.loads(found.value.decode()) if found is not None else None
        return self._leader

    # --- periodic passes ------------------------------------------------------------------------------

    async def _loop(self) -> None:
        config = self._ctx.config
        interval_s = config.broker_load_shedding_interval_ms / 1000
        while not self._stopped:
            await asyncio.sleep(interval_s)
            if self._stopped or self._ownership.draining or not self._ctx.astore.lease_valid():
                continue
            self._pass += 1
            try:
                if config.broker_bundle_auto_split:
                    await self.split_busy_bundles()
                if self.is_leader:
                    await self.shed()
            except StrataError as exc:
                log.warning("load management pass: %s", exc)
            except Exception:   # the loop lives as long as the broker: a bug in one pass must not end it
                log.exception("load management pass failed")

    async def split_busy_bundles(self) -> list[str]:
        """Split every bundle of ours past a topic-count or msg-rate threshold; returns their keys."""
        ownership, c = self._ownership, self._ctx.config
        split = []
        for tenant, ns, bundle in ownership.owned():
            topics = ownership.topics_in(tenant, ns, bundle)
            msg_rate = sum(rates(t)[0] + out_rates(t)[0] for t in topics)
            if len(topics) <= c.broker_bundle_split_topics_max and msg_rate <= c.broker_bundle_split_msg_rate_max:
                continue
            log.info("splitting bundle %s/%s/%s: %d topics, %.0f msg/s", tenant, ns, bundle.key, len(topics), msg_rate)
            await ownership.split(tenant, ns, bundle, unload=False)
            split.append(f"{tenant}/{ns}/{bundle.key}")
        return split

    async def shed(self) -> str | None:
        """One shedding decision (see the module docstring); the bundle moved, if any."""
        live = self._registry.live()
        if len(live) < 2:
            return None
        counts = self._counts()
        scores = {key: load_score(b, counts) for key, b in live.items()}
        average = sum(scores.values()) / len(scores)
        busiest = max(live.values(), key=lambda b: (scores[b.key], b.key))
        target = min(live.values(), key=lambda b: (scores[b.key], counts.get(b.service_url, 0), b.key))
        over, least = scores[busiest.key], scores[target.key]
        count_gap = counts.get(busiest.service_url, 0) - counts.get(target.service_url, 0)
        if over - least < 2.0 or (over <= self._ctx.config.broker_load_shedding_ratio_max * average and count_gap < 2):
            return None
        bundle = self._pick_bundle(busiest)
        if bundle is None:
            return None
        log.info("shedding %s from %s (score %.2f, average %.2f, %d bundles) to %s (score %.2f, %d bundles)",
                 bundle, busiest.key, over, average, counts.get(busiest.service_url, 0), target.key, least,
                 counts.get(target.service_url, 0))
        await self._unload_on(busiest, bundle, target.key)
        self._recently_moved[bundle] = self._pass
        self._pending[f"{NAMESPACE_ROOT}/{bundle}"] = (busiest.service_url, target.service_url,
                                                       time.monotonic() + HINT_TTL_MS / 1000)
        return bundle

    def _counts(self) -> dict[str, int]:
        """Bundles per broker service URL: the ownership view, plus each bundle shed and not yet
        acquired (counted as its destination's until someone owns it or its hint expires)."""
        counts = self._ownership.owner_counts()
        owners = {path: native for path, (native, _, _) in self._ownership.view_items()}
        now = time.monotonic()
        for path, (source, destination, until) in list(self._pending.items()):
            owner = owners.get(path)
            if until < now or (owner is not None and owner != source):
                del self._pending[path]
            elif owner is None:
                counts[destination] = counts.get(destination, 0) + 1
        return counts

    def _pick_bundle(self, broker: BrokerInfo) -> str | None:
        owned = [path[len(NAMESPACE_ROOT) + 1:] for path, (native, _, disabled) in
                 self._ownership.view_items() if native == broker.service_url and not disabled]
        moved = self._recently_moved
        movable = [b for b in sorted(owned) if self._pass - moved.get(b, -_GRACE_PASSES) >= _GRACE_PASSES]
        if len(owned) < 2 or not movable:
            return None
        return movable[0]

    async def _unload_on(self, broker: BrokerInfo, bundle: str, destination: str) -> None:
        tenant, ns, key = bundle.split("/")
        config = self._ctx.config
        if broker.service_url == self._identity.service_url:
            await self._ownership.unload(tenant, ns, bundle_math.parse_bundle(key), destination=destination)
            return
        url = f"{broker.web_url}/admin/v2/namespaces/{tenant}/{ns}/{key}/unload"
        timeout = aiohttp.ClientTimeout(total=_UNLOAD_CALL_TIMEOUT_S)
        try:   # as this broker (broker_client_auth_token), the peer verified against tls_trust_certs_file
            async with aiohttp.ClientSession(timeout=timeout, headers=peer_headers(config)) as http, \
                    http.put(url, params={"destinationBroker": destination},
                             ssl=peer_ssl(config) or True) as response:
                if response.status >= 300:
                    log.warning("shedding: %s answered %d: %s", url, response.status, await response.text())
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("shedding: %s failed: %s", url, exc)
