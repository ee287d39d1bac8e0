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
from collections.abc import Callable
from typing import TYPE_CHECKING

from common.errors import StrataError
from metadata.api import SessionEvent

if TYPE_CHECKING:
    from broker.cluster.ownership import Ownership
    from broker.cluster.registry import BrokerRegistry
    from broker.context import BrokerContext
    from metadata.api import MetadataStore

log = logging.getLogger(__name__)

_RENEW_RETRY_S = 1.0


class LeaseWatch:
    def __init__(self, ctx: BrokerContext, store: MetadataStore, registry: BrokerRegistry, ownership: Ownership,
                 load_report: Callable[[], dict]) -> None:
        self._ctx = ctx
        self._store = store                  # the synchronous store: a new session is made on it
        self._registry = registry
        self._ownership = ownership
        self._load_report = load_report      # this broker's load report, as registered
        self._renewing: asyncio.Task | None = None
        self._stopped = False                # the broker is stopping: nothing more is done

    def start(self) -> None:
        self._ctx.astore.add_session_listener(self._on_event)
        self._ctx.spawn(self._report_loop())

    def stop(self) -> None:
        self._stopped = True

    def _on_event(self, event: SessionEvent) -> None:
        if self._stopped:
            return
        if event is SessionEvent.LEASE_LOST:
            self._ctx.spawn(self._ownership.drop_all("metadata lease lapsed"))
        elif event is SessionEvent.LEASE_REGAINED:
            log.warning("metadata lease renewed again; serving resumes")
        elif event is SessionEvent.EXPIRED and (self._renewing is None or self._renewing.done()):
            self._renewing = self._ctx.spawn(self._new_session())

    async def _new_session(self) -> None:
        await self._ownership.drop_all("metadata session expired")
        while not self._stopped:
            try:
                session_id = await asyncio.to_thread(self._store.new_session)
                await self._registry.register(self._load_report())
                log.warning("registered again under a new metadata session %s", session_id[:8])
                return
            except StrataError as exc:
                log.warning("registering under a new metadata session failed (retrying): %s", exc)
                await asyncio.sleep(_RENEW_RETRY_S)

    async def _report_loop(self) -> None:
        interval_s = self._ctx.config.broker_load_report_interval_ms / 1000
        while not self._stopped:
            await asyncio.sleep(interval_s)
            if self._stopped or not self._ctx.astore.lease_valid():
                continue
            if self._renewing is not None and not self._renewing.done():
                continue
            try:
                if not await self._registry.report(self._load_report()):
                    await self._registry.register(self._load_report())
            except StrataError as exc:
                log.warning("load report not written: %s", exc)
