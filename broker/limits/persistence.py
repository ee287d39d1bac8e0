"""Storage policies per namespace and topic: persistence (ensemble, write and ack quorums, the
cursor's mark-delete rate), deduplicationSnapshotInterval and delayedDelivery.

Bodies (Pulsar's PersistencePolicies, DelayedDeliveryPolicies):
- persistence: `{"bookkeeperEnsemble": e, "bookkeeperWriteQuorum": w, "bookkeeperAckQuorum": a,
  "managedLedgerMaxMarkDeleteRate": r}` with e >= w >= a >= 1;
- deduplicationSnapshotInterval: seconds between dedup snapshots (an integer >= 0);
- delayedDelivery: `{"active": bool, "tickTime": ms, "maxDeliveryDelayInMillis": ms}`.

What must hold: a stored persistence value has e >= w >= a >= 1.
"""

from __future__ import annotations

from typing import Any

from broker.limits.spec import CliFlag, PolicySpec, boolean, int_at_least, integer, number, obj, switch_pair
from common.config import Config
from common.errors import NotAllowed


def _positive(value: object, name: str) -> int:
    got = integer(value, name)
    if got < 1:
        raise NotAllowed(f"{name} must be > 0", value=got)
    return got


def _not_negative(value: object, name: str) -> int:
    got = integer(value, name)
    if got < 0:
        raise NotAllowed(f"{name} must be 0 or more", value=got)
    return got


def _rate(value: object, name: str) -> float:
    got = number(value, name)
    if got < 0:
        raise NotAllowed(f"{name} must be 0 or more", value=got)
    return got


def check_persistence(body: object) -> dict[str, Any]:
    got = obj(body, "persistence",
              {"bookkeeperEnsemble": _positive, "bookkeeperWriteQuorum": _positive,
               "bookkeeperAckQuorum": _positive, "managedLedgerMaxMarkDeleteRate": _rate},
              {"managedLedgerMaxMarkDeleteRate": 0.0})
    e, w, a = got["bookkeeperEnsemble"], got["bookkeeperWriteQuorum"], got["bookkeeperAckQuorum"]
    if None in (e, w, a):
        raise NotAllowed("persistence needs bookkeeperEnsemble, bookkeeperWriteQuorum and bookkeeperAckQuorum")
    if not e >= w >= a:
        raise NotAllowed(f"Bookkeeper Ensemble ({e}) >= WriteQuorum ({w}) >= AckQuoru ({a})")
    return got


def _persistence_default(config: Config) -> dict[str, Any]:
    return {"bookkeeperEnsemble": config.ledger_ensemble_size, "bookkeeperWriteQuorum": config.ledger_write_quorum,
            "bookkeeperAckQuorum": config.ledger_ack_quorum, "managedLedgerMaxMarkDeleteRate": 0.0}


def check_delayed_delivery(body: object) -> dict[str, Any]:
    return obj(body, "delayedDelivery",
               {"active": boolean, "tickTime": _positive, "maxDeliveryDelayInMillis": _not_negative},
               {"active": True, "tickTime": 1000, "maxDeliveryDelayInMillis": 0})


def _delayed_default(config: Config) -> dict[str, Any]:
    return {"active": config.broker_delayed_delivery_enabled, "tickTime": config.broker_delayed_delivery_tick_ms,
            "maxDeliveryDelayInMillis": config.broker_delayed_delivery_max_delay_ms}


PERSISTENCE = PolicySpec(
    key="persistence", route="persistence", topic_route="persistence", check=check_persistence,
    default=_persistence_default, cli="persistence", topic_cli="persistence",
    flags=(CliFlag(("--bookkeeper-ensemble", "-e"), "bookkeeperEnsemble", required=True),
           CliFlag(("--bookkeeper-write-quorum", "-w"), "bookkeeperWriteQuorum", required=True),
           CliFlag(("--bookkeeper-ack-quorum", "-a"), "bookkeeperAckQuorum", required=True),
           CliFlag(("--ml-mark-delete-max-rate", "-r"), "managedLedgerMaxMarkDeleteRate", parse=float, default=0.0)),
    doc="ensemble, write and ack quorums of the topic's new ledgers, and its cursors' mark-delete rate")
DEDUP_SNAPSHOT_INTERVAL = PolicySpec(
    key="deduplicationSnapshotIntervalSeconds", route="deduplicationSnapshotInterval",
    topic_route="deduplicationSnapshotInterval", scalar=True,
    check=int_at_least("deduplicationSnapshotInterval", 0),
    default=lambda config: config.broker_dedup_snapshot_interval_ms // 1000,
    cli="deduplication-snapshot-interval", topic_cli="deduplication-snapshot-interval",
    flags=(CliFlag(("--interval", "-i"), "value", required=True, help="seconds"),),
    doc="seconds between snapshots of the deduplication state")
DELAYED_DELIVERY = PolicySpec(
    key="delayed_delivery_policies", route="delayedDelivery", topic_route="delayedDelivery",
    cli_body=switch_pair("active", "disabled"),
    check=check_delayed_delivery, default=_delayed_default, cli="delayed-delivery", topic_cli="delayed-delivery",
    flags=(CliFlag(("--enable", "-e"), "active", switch=True),
           CliFlag(("--disable", "-d"), "disabled", switch=True),
           CliFlag(("--time", "-t"), "tickTime", default=1000, help="tick time, ms"),
           CliFlag(("--maxDelay", "-md"), "maxDeliveryDelayInMillis", default=0, help="ms; 0: no limit")),
    doc="whether delayed messages wait for their time, how often due ones are checked, the longest delay")

SPECS = (PERSISTENCE, DEDUP_SNAPSHOT_INTERVAL, DELAYED_DELIVERY)
