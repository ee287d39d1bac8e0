"""The broker registry: which brokers are alive, where they listen, and how loaded they are.

Each broker holds an ephemeral key `/loadbalance/brokers/<host>:<webPort>` (Pulsar's path) bound
to its metadata session, holding its load report (`broker.cluster.load_report`, Pulsar's LocalBrokerData
names). It is rewritten every `broker_load_report_interval_ms`. The key vanishes within the lease
after the broker dies, and at once when it stops.

`live()` is a view of every registered broker, kept by a watch on the prefix (about 0.1 s behind
the store), so placement decisions cost no round trip.

Registering under a key another session holds: if that is this host's previous incarnation (same
hostname, its pid no longer running), the key is taken over at once; otherwise the registry waits
up to a lease plus a second for it to expire and then refuses with BrokerAddressInUse, so two
live brokers never share an advertised address.

What must hold: a broker serves bundles only while its registry key exists under its current
session (`broker.cluster.lease_watch` re-registers after a new session).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from dataclasses import dataclass, field

from broker.cluster import listeners
from common.config import Config
from common.errors import AlreadyExists, BadVersion, BrokerAddressInUse, NotFound, StrataError
from metadata.api import AsyncStore, EventKind, Watch, WatchEvent

log = logging.getLogger(__name__)

BROKERS_ROOT = "/loadbalance/brokers"
_TAKEOVER_POLL_S = 0.2


@dataclass(frozen=True)
class BrokerInfo:
    """One registered broker, as its last report says."""

    key: str                       # host:webPort, the registry key's last segment
    web_url: str
    service_url: str
    broker_id: str                 # the report's brokerId: host:webPort, as `brokers list` names it
    report: dict = field(default_factory=dict, compare=False)

    @property
    def service_url_tls(self) -> str:
        """Its pulsar+ssl:// URL, from its report's `pulsarServiceUrlTls` ('' : no TLS port)."""
        url = self.report.get("pulsarServiceUrlTls")
        return url if isinstance(url, str) else ""

    @property
    def web_url_tls(self) -> str:
        """Its admin https:// URL, from its report's `webServiceUrlTls` ('' : no TLS admin port)."""
        url = self.report.get("webServiceUrlTls")
        return url if isinstance(url, str) else ""

    @property
    def listeners(self) -> dict[str, listeners.Listener]:
        """Its advertised listeners, from its report's `advertisedListeners` (none: {})."""
        return listeners.decode(self.report.get("advertisedListeners"))

    @property
    def msg_rate(self) -> float:
        return float(self.report.get("msgRateIn", 0.0)) + float(self.report.get("msgRateOut", 0.0))

    @classmethod
    def from_value(cls, key: str, raw: bytes) -> BrokerInfo | None:
        try:
            data = json.loads(raw.decode())
            return cls(key, data["webServiceUrl"], data["pulsarServiceUrl"], data.get("brokerId", key), data)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def _pid_running(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BrokerRegistry:
    def __init__(self, astore: AsyncStore, config: Config, key: str) -> None:
        self._astore = astore
        self._config = config
        self.key = key                           # host:webPort
        self.path = f"{BROKERS_ROOT}/{key}"
        self._brokers: dict[str, BrokerInfo] = {}
        self._watch: Watch | None = None
        self._version = 0                        # our key's version (0: not registered)

    # --- the view --------------------------------------------------------------------------------

    async def start_view(self) -> None:
        """Fill the view and keep it current (idempotent)."""
        if self._watch is None:
            self._watch = await self._astore.watch(BROKERS_ROOT, self._changed)
        await self.refresh()

    async def refresh(self) -> None:
        found = await self._astore.list_prefix(BROKERS_ROOT)
        brokers = {}
        for path, versioned in found:
            key = path.rsplit("/", 1)[-1]
            info = BrokerInfo.from_value(key, versioned.value)
            if info is not None:
                brokers[key] = info
        self._brokers = brokers

    def _changed(self, event: WatchEvent) -> None:
        key = event.path.rsplit("/", 1)[-1]
        if event.kind is EventKind.DELETED or event.value is None:
            self._brokers.pop(key, None)
            return
        info = BrokerInfo.from_value(key, event.value)
        if info is not None:
            self._brokers[key] = info

    def live(self) -> dict[str, BrokerInfo]:
        return dict(self._brokers)

    async def is_registered(self, key: str) -> bool:
        """Whether `key` is registered in the store now (not the view); a gone one leaves the view."""
        if await self._astore.get(f"{BROKERS_ROOT}/{key}") is not None:
            return True
        self._brokers.pop(key, None)
        return False

    def by_service_url(self, service_url: str) -> BrokerInfo | None:
        return next((b for b in self._brokers.values() if b.service_url == service_url), None)

    # --- our own key -----------------------------------------------------------------------------

    async def register(self, report: dict) -> None:
        """Create our key (see the module docstring for a key another session holds)."""
        value = json.dumps(report).encode()
        deadline = asyncio.get_running_loop().time() + self._config.metadata_session_lease_ms / 1000 + 1.0
        while True:
            try:
                self._version = await self._astore.create(self.path, value, ephemeral=True)
                break
            except AlreadyExists:
                pass
            found = await self._astore.get(self.path)
            if found is None:
                continue
            if found.ephemeral_owner == self._astore.session_id:
                self._version = await self._astore.put(self.path, value, expected_version=found.version)
                break
            if await self._take_over_previous(found.value, found.version):
                continue
            if asyncio.get_running_loop().time() >= deadline:
                raise BrokerAddressInUse("another live broker is registered with this advertised address",
                                         key=self.key)
            await asyncio.sleep(_TAKEOVER_POLL_S)
        log.info("registered broker %s", self.key)
        await self.start_view()

    async def _take_over_previous(self, raw: bytes, version: int) -> bool:
        """Delete a key left by this host's previous incarnation; False if it is someone else's."""
        try:
            data = json.loads(raw.decode())
        except ValueError:
            data = {}
        if data.get("hostname") != socket.gethostname() or _pid_running(data.get("pid")):
            return False
        try:
            await self._astore.delete(self.path, expected_version=version)
        except (NotFound, BadVersion):
            pass
        log.info("took over the registry key of this broker's previous incarnation (pid %s)", data.get("pid"))
        return True

    async def report(self, report: dict) -> bool:
        """Rewrite our key with a fresh load report, by compare-and-set: a plain put would
        re-create the key as a persistent one after our session lost it. False when it is gone
        (the lease watch registers again under a new session)."""
        if not self._version:
            return False
        try:
            self._version = await self._astore.put(self.path, json.dumps(report).encode(),
                                                   expected_version=self._version)
        except (NotFound, BadVersion):
            self._version = 0
            return False
        return True

    async def unregister(self) -> None:
        """Delete our key — only if we hold it: a broker refused with BrokerAddressInUse must
        not delete the live broker's key on its way out."""
        if not self._version:
            return
        try:
            await self._astore.delete(self.path, expected_version=self._version)
        except (NotFound, BadVersion, StrataError):
            pass
        self._version = 0

    def stop_view(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
