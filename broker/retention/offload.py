"""Effective offload policies and the broker's automatic offload (Pulsar's names and semantics).

Where the values live (`broker.records.policies` records, every value JSON):
- namespace policies: `offload_threshold` (bytes; -1 = unset: the broker's default applies),
  `offload_threshold_in_seconds` (seconds; -1 = unset), `offload_deletion_lag_ms` (ms; absent =
  unset) — Pulsar's Policies field names; the namespace's offloadPolicies object is a view of
  these three (`namespace_fields`, `namespace_offload_policies`), so there is one source of truth;
- topic policies: `offload_policies` = an OffloadPolicies object of which Strata keeps
  `managedLedgerOffloadThresholdInBytes`, `managedLedgerOffloadThresholdInSeconds` and
  `managedLedgerOffloadDeletionLagInMillis` (null = unset);
- config: `offload_threshold_bytes`, `offload_threshold_seconds`, `offload_deletion_lag_ms`.

Effective value of each of the three: the topic's if set, else the namespace's if set, else the
config's. A threshold below 0 means "off" (Pulsar: negative disables, 0 = as soon as possible);
a deletion lag below 0 means "never delete the bookie copy".

When the broker acts (`auto_offload`, `retention_pass`): on every ledger close of a loaded topic
(the managed ledger's ledger-closed listener) and once per retention pass, the effective
thresholds go to `ManagedLedger.maybe_offload` (one offload at a time per managed ledger: it
does nothing while one runs); in the retention pass, the effective deletion lag goes to
`ManagedLedger.delete_offloaded_from_bookies`. Nothing happens while the broker has no usable
cold tier (`ctx.cold is None`): deleting bookie copies then would leave data unreadable.

What must hold: a stored value always passes `check_*` (the admin API refuses anything else with
400/412 before writing); an automatic offload never raises into the ledger-close path.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.records import policies
from common.config import Config
from common.errors import BadRequestBody, NotAllowed

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

# namespace policy fields (Pulsar's Policies JSON names)
NS_THRESHOLD_KEY = "offload_threshold"
NS_THRESHOLD_SECONDS_KEY = "offload_threshold_in_seconds"
NS_DELETION_LAG_KEY = "offload_deletion_lag_ms"
# topic policy field holding an OffloadPolicies object
TOPIC_OFFLOAD_KEY = "offload_policies"
# OffloadPolicies field names (Pulsar's OffloadPoliciesImpl) Strata keeps
THRESHOLD_BYTES_FIELD = "managedLedgerOffloadThresholdInBytes"
THRESHOLD_SECONDS_FIELD = "managedLedgerOffloadThresholdInSeconds"
DELETION_LAG_FIELD = "managedLedgerOffloadDeletionLagInMillis"
OFFLOAD_POLICY_FIELDS = (THRESHOLD_BYTES_FIELD, THRESHOLD_SECONDS_FIELD, DELETION_LAG_FIELD)

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


@dataclass(frozen=True)
class OffloadPolicy:
    threshold_bytes: int      # offload once the topic's ledgers exceed this; < 0 off, 0 ASAP
    threshold_seconds: int    # offload ledgers older than this; < 0 off
    deletion_lag_ms: int      # delete the bookie copy this long after the offload; < 0 never

    @property
    def auto_enabled(self) -> bool:
        return self.threshold_bytes >= 0 or self.threshold_seconds >= 0


def check_long(value: object, what: str) -> int:
    """A JSON long: BadRequestBody (400) for anything but an integer, NotAllowed (412) outside
    Java's long range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequestBody(f"{what} must be an integer", value=repr(value)[:64])
    if not LONG_MIN <= value <= LONG_MAX:
        raise NotAllowed(f"invalid {what}: out of the 64-bit range", value=value)
    return value


def check_offload_policies(body: object) -> dict:
    """A topic's OffloadPolicies body, checked, as stored: the three fields Strata applies (null
    = unset); other OffloadPolicies fields (driver, bucket, ...) are ignored, as one cold tier
    serves the whole broker."""
    if not isinstance(body, dict):
        raise BadRequestBody("offloadPolicies body must be a JSON object")
    out: dict[str, int | None] = {}
    for field in OFFLOAD_POLICY_FIELDS:
        value = body.get(field)
        out[field] = None if value is None else check_long(value, field)
    if all(v is None for v in out.values()):
        raise NotAllowed("offloadPolicies must set at least one of " + ", ".join(OFFLOAD_POLICY_FIELDS))
    return out


# OffloadPolicies field -> (namespace policy key, its "unset" value; None: the key is removed)
_NAMESPACE_FIELDS = {THRESHOLD_BYTES_FIELD: (NS_THRESHOLD_KEY, -1),
                     THRESHOLD_SECONDS_FIELD: (NS_THRESHOLD_SECONDS_KEY, -1),
                     DELETION_LAG_FIELD: (NS_DELETION_LAG_KEY, None)}


def namespace_fields(offload_policies: dict) -> dict:
    """A namespace's OffloadPolicies (as `check_offload_policies` gives it) as the namespace
    policy fields it stands for (None = remove the field)."""
    out = {}
    for field, (key, unset) in _NAMESPACE_FIELDS.items():
        value = offload_policies.get(field)
        out[key] = unset if value is None else value
    return out


def namespace_offload_policies(ns_policies: dict) -> dict | None:
    """The namespace's three offload values as an OffloadPolicies object (null fields unset);
    None when none is set."""
    out = {}
    for field, (key, unset) in _NAMESPACE_FIELDS.items():
        value = ns_policies.get(key)
        out[field] = None if value is None or value == unset else value
    return None if all(v is None for v in out.values()) else out


def effective(ns_policies: dict, config: Config, topic_policies: dict | None = None) -> OffloadPolicy:
    """The effective policy: topic > namespace > config, field by field."""
    topic_level = (topic_policies or {}).get(TOPIC_OFFLOAD_KEY) or {}

    def pick(topic_field: str, ns_key: str, ns_unset: object, default: int) -> int:
        value = topic_level.get(topic_field)
        if value is None:
            value = ns_policies.get(ns_key)
            if value is None or value == ns_unset:
                value = default
        return int(value)

    return OffloadPolicy(
        threshold_bytes=pick(THRESHOLD_BYTES_FIELD, NS_THRESHOLD_KEY, -1, config.offload_threshold_bytes),
        threshold_seconds=pick(THRESHOLD_SECONDS_FIELD, NS_THRESHOLD_SECONDS_KEY, -1,
                               config.offload_threshold_seconds),
        deletion_lag_ms=pick(DELETION_LAG_FIELD, NS_DELETION_LAG_KEY, None, config.offload_deletion_lag_ms))


async def effective_for(ctx: BrokerContext, topic: PersistentTopic) -> OffloadPolicy:
    """The effective policy of a topic, read from the metadata store now."""
    name = topic.name
    ns_policies = await policies.namespace_policies(ctx.astore, name.tenant, name.namespace)
    return effective(ns_policies, ctx.config, await policies.topic_policies(ctx.astore, name))


def _start_auto(topic: PersistentTopic, policy: OffloadPolicy, now_ms: int) -> asyncio.Task | None:
    """Ask the managed ledger to offload what the thresholds select (None: nothing started)."""
    if not policy.auto_enabled:
        return None
    task = topic.ml.maybe_offload(max(-1, policy.threshold_bytes), max(-1, policy.threshold_seconds), now_ms)
    if task is not None:
        task.add_done_callback(_log_failure(str(topic.name)))
    return task


def _log_failure(topic_name: str):
    def done(task: asyncio.Task) -> None:
        if task.cancelled():
            return
        exc = task.exception()       # retrieved here; the status keeps it for offload-status
        if exc is not None:
            log.warning("automatic offload of %s failed: %s", topic_name, exc)
    return done


async def auto_offload(ctx: BrokerContext, topic: PersistentTopic) -> asyncio.Task | None:
    """A ledger of `topic` closed: start an automatic offload if its thresholds say so."""
    if ctx.cold is None or topic.closing:
        return None
    policy = await effective_for(ctx, topic)
    return _start_auto(topic, policy, ctx.clock.wall_ms())


def on_ledger_closed(ctx: BrokerContext, topic: PersistentTopic) -> None:
    """The managed ledger's ledger-closed listener: evaluate the thresholds in the background
    (policy reads are asynchronous; a failure is logged by `ctx.spawn`)."""
    if ctx.cold is None or topic.closing:
        return
    ctx.spawn(auto_offload(ctx, topic))


async def retention_pass(ctx: BrokerContext, topic: PersistentTopic, ns_policies: dict,
                         topic_policies: dict | None) -> list[int]:
    """The retention task's offload step for one topic: start an automatic offload if due, then
    delete the bookie copies of ledgers offloaded longer than the deletion lag ago. Returns the
    ids of the ledgers whose bookie copy was deleted."""
    if ctx.cold is None or topic.closing:
        return []
    policy = effective(ns_policies, ctx.config, topic_policies)
    now_ms = ctx.clock.wall_ms()
    _start_auto(topic, policy, now_ms)
    if policy.deletion_lag_ms < 0:
        return []
    return await topic.ml.delete_offloaded_from_bookies(policy.deletion_lag_ms, now_ms)
