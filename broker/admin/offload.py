"""The offload admin routes (Pulsar's paths, JSON and status codes), registered by `broker.admin.server`.

Topic (`/admin/v2/persistent/{t}/{ns}/{topic}`):
- `PUT .../offload` body MessageIdImpl `{"ledgerId": L, "entryId": E, "partitionIndex": P}`
  (other keys ignored) → 204: an offload of every closed ledger before L starts in the
  background. 409 "Offload already running"; 404 unknown topic; 400 a body that is not such a
  message id; 412 a message id that names no kept entry of the topic (L not kept, E outside the
  ledger), or a broker without a usable cold tier (the reason says why); 503 while the topic
  closes. Nothing starts on an error.
- `GET .../offload` → OffloadProcessStatus `{"status": NOT_RUN|RUNNING|SUCCESS|ERROR,
  "lastError": "", "firstUnoffloadedMessage": {"ledgerId", "entryId", "partitionIndex"}}` plus
  Strata's `"progress": {"entriesDone", "entriesTotal"}` for the CLI's progress bar. As Pulsar's:
  NOT_RUN when no offload ran since the topic was loaded; firstUnoffloadedMessage is
  (-1, -1, -1) unless SUCCESS. A broker whose cold tier failed its start-up check answers ERROR
  with that reason for a topic that has not run an offload.
- `GET .../internalStats` → `broker.stats.internal_stats`.
- `GET|POST|DELETE .../offloadPolicies`: the topic's OffloadPolicies (`broker.retention.offload`
  field names; GET: null if unset, `?applied=true` the effective values).

Namespace (`/admin/v2/namespaces/{t}/{ns}`):
- `GET|PUT|DELETE .../offloadThreshold` (bytes) and `.../offloadThresholdInSeconds` (seconds): a
  JSON integer; GET answers -1 when unset (the broker's default applies); DELETE unsets it.
- Every namespace route answers 404 "Namespace does not exist" for a namespace never created.
- `GET|PUT|DELETE .../offloadDeletionLagMs` (ms): GET answers null when unset.
- `GET|POST|DELETE .../offloadPolicies`: the same three values as one OffloadPolicies object
  (`managedLedgerOffloadThresholdInBytes`, `...ThresholdInSeconds`, `...DeletionLagInMillis`;
  null = unset), written in one compare-and-set (POST replaces all three, DELETE clears them);
  GET answers null when none is set.

Bad values: 400 when the body is not a JSON integer (or object where one is due), 412 outside
the 64-bit range; nothing is stored then. Errors are `{"reason": ...}`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import body_json, namespace_of, topic_of
from broker.records import policies
from broker.retention import offload as offload_policy
from broker.retention.offload import check_long
from broker.stats.internal_stats import internal_stats
from common.errors import BadRequestBody, NotAllowed, NotFound, OffloadNotConfigured
from common.topic_names import TopicName
from ledger.ml_offload import OffloadStatus
from ledger.position import Position
from ledger.types import LedgerState

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

EARLIEST_ID = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}


def register(app: web.Application, service: BrokerService) -> None:
    """Add the offload routes to the admin application."""
    r = _OffloadRoutes(service)
    topic = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
    ns = "/admin/v2/namespaces/{tenant}/{ns}"
    app.router.add_put(topic + "/offload", r.trigger)
    app.router.add_get(topic + "/offload", r.status)
    app.router.add_get(topic + "/internalStats", r.internal_stats)
    app.router.add_get(topic + "/offloadPolicies", r.get_topic_policies)
    app.router.add_post(topic + "/offloadPolicies", r.set_topic_policies)
    app.router.add_delete(topic + "/offloadPolicies", r.remove_topic_policies)
    for suffix, key in (("offloadThreshold", offload_policy.NS_THRESHOLD_KEY),
                        ("offloadThresholdInSeconds", offload_policy.NS_THRESHOLD_SECONDS_KEY)):
        app.router.add_get(ns + "/" + suffix, functools.partial(r.get_ns_long, key=key, unset=-1))
        app.router.add_put(ns + "/" + suffix, functools.partial(r.set_ns_long, key=key, what=suffix))
        app.router.add_delete(ns + "/" + suffix, functools.partial(r.remove_ns_key, key=key))
    lag = offload_policy.NS_DELETION_LAG_KEY
    app.router.add_get(ns + "/offloadDeletionLagMs", functools.partial(r.get_ns_long, key=lag, unset=None))
    app.router.add_put(ns + "/offloadDeletionLagMs",
                       functools.partial(r.set_ns_long, key=lag, what="offloadDeletionLagMs"))
    app.router.add_delete(ns + "/offloadDeletionLagMs", functools.partial(r.remove_ns_key, key=lag))
    app.router.add_get(ns + "/offloadPolicies", r.get_ns_policies)
    app.router.add_post(ns + "/offloadPolicies", r.set_ns_policies)
    app.router.add_delete(ns + "/offloadPolicies", r.remove_ns_policies)


def message_id(body: object) -> Position:
    """A MessageIdImpl body as a position; BadRequestBody (400) if it is not one."""
    shape = 'a message id must be {"ledgerId": L, "entryId": E} (partitionIndex optional)'
    if not isinstance(body, dict):
        raise BadRequestBody(shape)
    ledger_id, entry_id = body.get("ledgerId"), body.get("entryId")
    if not isinstance(ledger_id, int) or not isinstance(entry_id, int) or isinstance(ledger_id, bool) \
            or isinstance(entry_id, bool):
        raise BadRequestBody(shape)
    return Position(ledger_id, entry_id)


def check_offload_position(ledgers: list, before: Position) -> None:
    """NotAllowed (412) unless `before` names an entry of a kept ledger (entry 0 of any kept
    ledger and one past the open ledger's last entry included, as Pulsar allows)."""
    info = next((i for i in ledgers if i.ledger_id == before.ledger_id), None)
    if info is None:
        raise NotAllowed(f"Invalid message id {before}: ledger {before.ledger_id} is not kept by the topic")
    last_entry = info.entries if info.state is LedgerState.OPEN else max(0, info.entries - 1)
    if not 0 <= before.entry_id <= last_entry:
        raise NotAllowed(f"Invalid message id {before}: ledger {before.ledger_id} has entries 0..{last_entry}")


def status_json(status: OffloadStatus, cold_error: str | None) -> dict:
    """OffloadProcessStatus JSON of a managed ledger's `offload_status` (plus progress)."""
    state = status.status
    last_error = status.last_error or ""
    if state == "NOT_RUN" and cold_error is not None:
        state, last_error = "ERROR", cold_error
    first = status.first_unoffloaded
    out = {
        "status": state,
        "lastError": last_error,
        "firstUnoffloadedMessage": ({"ledgerId": first.ledger_id, "entryId": first.entry_id, "partitionIndex": -1}
                                    if state == "SUCCESS" else dict(EARLIEST_ID)),
        "progress": {"entriesDone": status.entries_done, "entriesTotal": status.entries_total},
    }
    return out


def _retrieve(task: asyncio.Task) -> None:
    """The offload's outcome is reported by offload-status; take the exception off the task."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("offload failed: %s", task.exception())


class _OffloadRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def _known_topic(self, name: TopicName) -> PersistentTopic:
        """The topic, loaded if needed; NotFound (404) if it was never created."""
        if str(name) not in self.service.topics:
            known = await policies.topics_of_namespace(self.service.astore, name.tenant, name.namespace)
            if str(name) not in {str(n) for n in known}:
                raise NotFound("Topic not found", topic=str(name))
        return await self.service.get_topic(name)

    # --- topic ------------------------------------------------------------------------------

    async def trigger(self, request: web.Request) -> web.StreamResponse:
        name = topic_of(request)
        before = message_id(await body_json(request))
        topic = await self._known_topic(name)
        check_offload_position(topic.ml.ledgers(), before)
        if self.service.cold is None:
            raise OffloadNotConfigured(self.service.cold_error or
                                       "offload is not configured on this broker (offload_driver is empty)")
        task = topic.ml.start_offload(before)      # OffloadInProgress (409) if one runs
        task.add_done_callback(_retrieve)
        log.info("offload of %s before %s started", name, before)
        return web.Response(status=204)

    async def status(self, request: web.Request) -> web.StreamResponse:
        topic = await self._known_topic(topic_of(request))
        return web.json_response(status_json(topic.ml.offload_status, self.service.cold_error))

    async def internal_stats(self, request: web.Request) -> web.StreamResponse:
        topic = await self._known_topic(topic_of(request))
        return web.json_response(internal_stats(topic))

    async def get_topic_policies(self, request: web.Request) -> web.StreamResponse:
        name = topic_of(request)
        own = await policies.topic_policies(self.service.astore, name)
        if request.query.get("applied", "false").lower() != "true":
            return web.json_response(own.get(offload_policy.TOPIC_OFFLOAD_KEY))
        ns_policies = await policies.namespace_policies(self.service.astore, name.tenant, name.namespace)
        policy = offload_policy.effective(ns_policies, self.service.config, own)
        return web.json_response({offload_policy.THRESHOLD_BYTES_FIELD: policy.threshold_bytes,
                                  offload_policy.THRESHOLD_SECONDS_FIELD: policy.threshold_seconds,
                                  offload_policy.DELETION_LAG_FIELD: policy.deletion_lag_ms})

    async def set_topic_policies(self, request: web.Request) -> web.StreamResponse:
        name = topic_of(request)
        value = offload_policy.check_offload_policies(await body_json(request))
        await policies.set_topic_policy(self.service.astore, name, offload_policy.TOPIC_OFFLOAD_KEY, value)
        return web.Response(status=204)

    async def remove_topic_policies(self, request: web.Request) -> web.StreamResponse:
        await policies.set_topic_policy(self.service.astore, topic_of(request),
                                        offload_policy.TOPIC_OFFLOAD_KEY, None)
        return web.Response(status=204)

    # --- namespace --------------------------------------------------------------------------

    async def get_ns_long(self, request: web.Request, *, key: str, unset: int | None) -> web.StreamResponse:
        found = await policies.existing_namespace_policies(self.service.astore, *namespace_of(request))
        value = found.get(key)
        return web.json_response(unset if value is None else value)

    async def set_ns_long(self, request: web.Request, *, key: str, what: str) -> web.StreamResponse:
        tenant, ns = namespace_of(request)
        value = check_long(await body_json(request), what)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, key, value)
        return web.Response(status=204)

    async def remove_ns_key(self, request: web.Request, *, key: str) -> web.StreamResponse:
        tenant, ns = namespace_of(request)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, key, None)
        return web.Response(status=204)

    async def get_ns_policies(self, request: web.Request) -> web.StreamResponse:
        found = await policies.existing_namespace_policies(self.service.astore, *namespace_of(request))
        return web.json_response(offload_policy.namespace_offload_policies(found))

    async def set_ns_policies(self, request: web.Request) -> web.StreamResponse:
        tenant, ns = namespace_of(request)
        value = offload_policy.check_offload_policies(await body_json(request))
        await policies.set_namespace_policies(self.service.astore, tenant, ns,
                                              offload_policy.namespace_fields(value))
        return web.Response(status=204)

    async def remove_ns_policies(self, request: web.Request) -> web.StreamResponse:
        tenant, ns = namespace_of(request)
        unset = dict.fromkeys(offload_policy.OFFLOAD_POLICY_FIELDS)
        await policies.set_namespace_policies(self.service.astore, tenant, ns, offload_policy.namespace_fields(unset))
        return web.Response(status=204)
