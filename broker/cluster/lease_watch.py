"""What a broker does when its metadata lease is in doubt, and its periodic load report.

The metadata store tells its listeners (`metadata.api.SessionEvent`, on the event loop):
- LEASE_LOST: no renewal for lease - margin by our own clock (the database is down, or this
  process was stalled, e.g. SIGSTOP). The broker stops serving every bundle at once
  (`Ownership.drop_all`: clients are sent CLOSE_PRODUCER / CLOSE_CONSUMER and look up again); the
  store already refuses every write, so nothing is added or acked from here on;
- LEASE_REGAINED: a renewal went through and the session still exists: our keys are still ours,
  lookups and loads serve them again;
- EXPIRED: the session was reaped, and its keys (registry, bundles) are gone, possibly already
  owned by others. The broker opens a new session and registers again, retrying every
  `_RENEW_RETRY_S` until it can (or it is shutting down).

The report loop rewrites the registry key every `broker_load_report_interval_ms`; a key found
gone while the lease holds (deleted by hand) is registered again.

What must hold: between LEASE_LOST and the next successful renewal the broker serves nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from common.errors import StrataError
from metadata.api import SessionEvent

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

_RENEW_RETRY_S = 1.0


class LeaseWatch:
    def __init__(self, service: BrokerService) -> None:
        self._service = service
        self._renewing: asyncio.Task | None = None

    def start(self) -> None:
        self._service.astore.add_session_listener(self._on_event)
        self._service.spawn(self._report_loop())

    def _on_event(self, event: SessionEvent) -> None:
        service = self._service
        if service.closing:
            return
        if event is SessionEvent.LEASE_LOST:
            service.spawn(service.ownership.drop_all("metadata lease lapsed"))
        elif event is SessionEvent.LEASE_REGAINED:
            log.warning("metadata lease renewed again; serving resumes")
        elif event is SessionEvent.EXPIRED and (self._renewing is None or self._renewing.done()):
            self._renewing = service.spawn(self._new_session())

    async def _new_session(self) -> None:
        service = self._service
        await service.ownership.drop_all("metadata session expired")
        while not service.closing:
            try:
                session_id = await asyncio.to_thread(service.store.new_session)
                await service.registry.register(service.load_report())
                log.warning("registered again under a new metadata session %s", session_id[:8])
                return
            except StrataError as exc:
                log.warning("registering under a new metadata session failed (retrying): %s", exc)
                await asyncio.sleep(_RENEW_RETRY_S)

    async def _report_loop(self) -> None:
        service = self._service
        interval_s = service.config.broker_load_report_interval_ms / 1000
        while not service.closing:
            await asyncio.sleep(interval_s)
            if service.closing or not service.astore.lease_valid():
                continue
            if self._renewing is not None and not self._renewing.done():
                continue
            try:
                if not await service.registry.report(service.load_report()):
                    await service.registry.register(service.load_report())
            except StrataError as exc:
                log.warning("load report not written: %s", exc)
