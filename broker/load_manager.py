"""Load management: leader election, load shedding and automatic bundle splits.

Leader: the broker holding the ephemeral key `/loadbalance/leader` (`{"brokerId", "serviceUrl",
"webServiceUrl"}`). Every broker tries to create it at start and again whenever it goes; the
key vanishes with its holder's session, so a dead leader is replaced within the lease.

Shedding (leader only, every `broker_load_shedding_interval_ms`): each live broker's load score
(`load_placement.load_score`: bundles owned, message rate, CPU) is compared with the cluster
average. A broker above `broker_load_shedding_threshold` × average, and at least two bundles'
worth above the least-loaded one (so one move narrows the gap and never swaps it), that owns two
or more bundles is asked to unload one bundle to the least-loaded broker (its admin
`PUT .../{bundle}/unload?destinationBroker=`; the leader's own bundles are unloaded directly).
A bundle moved by shedding is not moved again for `_GRACE_PASSES` passes, so bundles never
ping-pong.

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
from typing import TYPE_CHECKING

import aiohttp

from broker import bundles as bundle_math
from broker.load_placement import least_loaded, load_score
from broker.topic_stats import out_rates, rates
from common.errors import AlreadyExists, StrataError
from metadata.api import EventKind, Watch, WatchEvent

if TYPE_CHECKING:
    from broker.registry import BrokerInfo
    from broker.service import BrokerService

log = logging.getLogger(__name__)

LEADER_PATH = "/loadbalance/leader"
_GRACE_PASSES = 5
_UNLOAD_CALL_TIMEOUT_S = 30.0


class LoadManager:
    def __init__(self, service: BrokerService) -> None:
        self._service = service
        self.is_leader = False
        self._leader: dict | None = None
        self._watch: Watch | None = None
        self._recently_moved: dict[str, int] = {}     # bundle path -> pass number it moved at
        self._pass = 0

    # --- leader ------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._watch = await self._service.astore.watch(LEADER_PATH, self._leader_changed)
        await self.elect()
        self._service.spawn(self._loop())

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _leader_changed(self, event: WatchEvent) -> None:
        if event.kind is EventKind.DELETED:
            self._leader = None
            self.is_leader = False
            if not self._service.closing and not self._service.draining:
                self._service.spawn(self.elect())
        elif event.value is not None:
            self._leader = json.loads(event.value.decode())

    async def elect(self) -> None:
        """Become leader if nobody is; learn who is otherwise."""
        s = self._service
        me = {"brokerId": s.registry.key, "serviceUrl": s.advertised_url, "webServiceUrl": s.web_url}
        try:
            await s.astore.create(LEADER_PATH, json.dumps(me).encode(), ephemeral=True)
            self.is_leader, self._leader = True, me
            log.info("this broker is the leader")
            return
        except AlreadyExists:
            pass
        except StrataError as exc:
            log.warning("leader election: %s", exc)
            return
        found = await s.astore.get(LEADER_PATH)
        if found is None:
            return
        self._leader = json.loads(found.value.decode())
        self.is_leader = found.ephemeral_owner == s.astore.session_id

    async def leader(self) -> dict | None:
        """The current leader's `{"brokerId", "serviceUrl", "webServiceUrl"}`, or None."""
        if self._leader is None:
            found = await self._service.astore.get(LEADER_PATH)
            self._leader = json.loads(found.value.decode()) if found is not None else None
        return self._leader

    # --- periodic passes ------------------------------------------------------------------------------

    async def _loop(self) -> None:
        s = self._service
        interval_s = s.config.broker_load_shedding_interval_ms / 1000
        while not s.closing:
            await asyncio.sleep(interval_s)
            if s.closing or s.draining or not s.astore.lease_valid():
                continue
            self._pass += 1
            try:
                if s.config.broker_bundle_auto_split:
                    await self.split_busy_bundles()
                if self.is_leader:
                    await self.shed()
            except StrataError as exc:
                log.warning("load management pass: %s", exc)

    async def split_busy_bundles(self) -> list[str]:
        """Split every bundle of ours past a topic-count or msg-rate threshold; returns their keys."""
        s, c = self._service, self._service.config
        split = []
        for tenant, ns, bundle in s.ownership.owned():
            topics = s.ownership.topics_in(tenant, ns, bundle)
            msg_rate = sum(rates(t)[0] + out_rates(t)[0] for t in topics)
            if len(topics) <= c.broker_bundle_split_topics_max and msg_rate <= c.broker_bundle_split_msg_rate_max:
                continue
            log.info("splitting bundle %s/%s/%s: %d topics, %.0f msg/s", tenant, ns, bundle.key, len(topics), msg_rate)
            await s.ownership.split(tenant, ns, bundle, unload=False)
            split.append(f"{tenant}/{ns}/{bundle.key}")
        return split

    async def shed(self) -> str | None:
        """One shedding decision (see the module docstring); the bundle moved, if any."""
        s = self._service
        live = s.registry.live()
        if len(live) < 2:
            return None
        counts = s.ownership.owner_counts()
        scores = {key: load_score(b, counts) for key, b in live.items()}
        average = sum(scores.values()) / len(scores)
        busiest = max(live.values(), key=lambda b: scores[b.key])
        over, least = scores[busiest.key], min(scores.values())
        # well above the average, and a one-bundle move narrows the gap (4/0 -> 3/1 -> 2/2, stop)
        if over <= s.config.broker_load_shedding_threshold * average or over - least < 2.0:
            return None
        bundle = self._pick_bundle(busiest)
        if bundle is None:
            return None
        target = least_loaded([b for b in live.values() if b.key != busiest.key], counts)
        if target is None:
            return None
        log.info("shedding %s from %s (score %.2f, average %.2f) to %s", bundle, busiest.key, over, average, target.key)
        await self._unload_on(busiest, bundle, target.key)
        self._recently_moved[bundle] = self._pass
        return bundle

    def _pick_bundle(self, broker: BrokerInfo) -> str | None:
        owned = [path[len("/namespace/"):] for path, (native, _, _) in
                 self._service.ownership.view_items() if native == broker.service_url]
        moved = self._recently_moved
        movable = [b for b in sorted(owned) if self._pass - moved.get(b, -_GRACE_PASSES) >= _GRACE_PASSES]
        if len(owned) < 2 or not movable:
            return None
        return movable[0]

    async def _unload_on(self, broker: BrokerInfo, bundle: str, destination: str) -> None:
        tenant, ns, key = bundle.split("/")
        s = self._service
        if broker.service_url == s.advertised_url:
            await s.ownership.unload(tenant, ns, bundle_math.parse_bundle(key), destination=destination)
            return
        url = f"{broker.web_url}/admin/v2/namespaces/{tenant}/{ns}/{key}/unload"
        timeout = aiohttp.ClientTimeout(total=_UNLOAD_CALL_TIMEOUT_S)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http, \
                    http.put(url, params={"destinationBroker": destination}) as response:
                if response.status >= 300:
                    log.warning("shedding: %s answered %d: %s", url, response.status, await response.text())
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("shedding: %s failed: %s", url, exc)
