"""Storage policies per namespace and topic: persistence (ensemble, write and ack quorums, the
cursor's mark-delete rate), deduplicationSnapshotInterval and delayedDelivery, and the pure
pieces that enforce them (`broker.topics.storage_policies` applies them to loaded topics).

Bodies (Pulsar's PersistencePolicies, DelayedDeliveryPolicies):
- persistence: `{"bookkeeperEnsemble": e, "bookkeeperWriteQuorum": w, "bookkeeperAckQuorum": a,
  "managedLedgerMaxMarkDeleteRate": r}`; a field left out is Pulsar's default (2, 2, 2, 0.0).
  Checked as Pulsar's validatePersistencePolicies checks it, each refusal a 400 with its text:
  "Bookkeeper-Ensemble must be <= 5 and > 0." (the bound: `managed_ledger_ensemble_max`), the
  same for WriteQuorum and AckQuorum, then "Bookkeeper Ensemble (e) >= WriteQuorum (w) >=
  AckQuorum (a)". Pulsar does not check the rate; Strata refuses a negative one (400), which
  Pulsar's rate limiter would fail on when the cursor opens.
- deduplicationSnapshotInterval: seconds between dedup snapshots (an integer >= 0; 0: none taken
  by time, only every `broker_dedup_snapshot_interval_entries` entries, as Pulsar);
- delayedDelivery: `{"active": bool, "tickTime": ms, "maxDeliveryDelayInMillis": ms}`.

`StorageCounters` counts what these policies did on the broker's topics since it started
(`/metrics`: `broker.stats.metrics_storage_policies`).

What must hold: a stored persistence value has maxima >= e >= w >= a >= 1 (the maxima when it
was stored); `DelayedDelivery.refusal` refuses only when a limit is set and delayed delivery is
active (Pulsar's isExceedMaximumDeliveryDelay).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.limits.spec import CliFlag, PolicySpec, boolean, int_at_least, int_field, integer, number, obj, switch_pair
from common.config import Config
from common.errors import BadRequestBody, NotAllowed

# Pulsar's PersistencePolicies() and its broker's managedLedgerMax{EnsembleSize,WriteQuorum,AckQuorum}
PULSAR_BODY_DEFAULTS = {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
                        "managedLedgerMaxMarkDeleteRate": 0.0}
PULSAR_MAXIMA = (5, 5, 5)
_positive = int_field(1, "must be > 0")
_not_negative = int_field(0, "must be 0 or more")


def _rate(value: object, name: str) -> float:
    got = number(value, name)
    if got < 0:
        raise BadRequestBody(f"{name} must be 0 or more", value=got)
    return got


def check_persistence(body: object, maxima: tuple[int, int, int] = PULSAR_MAXIMA) -> dict[str, Any]:
    """The body as stored, checked in Pulsar's order with Pulsar's texts (all 400)."""
    got = obj(body, "persistence",
              {"bookkeeperEnsemble": integer, "bookkeeperWriteQuorum": integer,
               "bookkeeperAckQuorum": integer, "managedLedgerMaxMarkDeleteRate": _rate},
              PULSAR_BODY_DEFAULTS)
    e, w, a = got["bookkeeperEnsemble"], got["bookkeeperWriteQuorum"], got["bookkeeperAckQuorum"]
    for label, value, most in (("Ensemble", e, maxima[0]), ("WriteQuorum", w, maxima[1]),
                               ("AckQuorum", a, maxima[2])):
        if not 0 < value <= most:
            raise BadRequestBody(f"Bookkeeper-{label} must be <= {most} and > 0.")
    if not e >= w >= a:
        raise BadRequestBody(f"Bookkeeper Ensemble ({e}) >= WriteQuorum ({w}) >= AckQuorum ({a})")
    return got


def _check_persistence_bounded(body: object, config: Config) -> dict[str, Any]:
    return check_persistence(body, (config.managed_ledger_ensemble_max, config.managed_ledger_write_quorum_max,
                                    config.managed_ledger_ack_quorum_max))


def quorum_of(value: dict[str, Any]) -> tuple[int, int, int]:
    """(E, Qw, Qa) of a topic's new ledgers from its effective persistence value."""
    return value["bookkeeperEnsemble"], value["bookkeeperWriteQuorum"], value["bookkeeperAckQuorum"]


def mark_delete_interval_ms(value: dict[str, Any], base_ms: int) -> int:
    """How far apart a cursor's persisted mark-delete writes must be: the broker's coalescing
    interval (`cursor_persist_interval_ms`), or 1/rate when the rate asks for fewer (0: no limit)."""
    rate = float(value.get("managedLedgerMaxMarkDeleteRate") or 0.0)
    if rate <= 0:
        return base_ms
    return max(base_ms, round(1000 / rate))


def _persistence_default(config: Config) -> dict[str, Any]:
    return {"bookkeeperEnsemble": config.ledger_ensemble_size, "bookkeeperWriteQuorum": config.ledger_write_quorum,
            "bookkeeperAckQuorum": config.ledger_ack_quorum, "managedLedgerMaxMarkDeleteRate": 0.0}


@dataclass
class StorageCounters:
    """What the storage policies did since the broker started, over all its topics."""

    dedup_snapshots: int = 0               # dedup snapshots written (deduplicationSnapshotInterval)
    dedup_snapshot_failures: int = 0       # snapshot writes that failed (logged; retried later)


@dataclass(frozen=True)
class DelayedDelivery:
    """A topic's effective delayedDelivery policy."""

    active: bool          # False: deliver_at is ignored, every message goes out at once
    tick_ms: int          # how often due messages are looked for (the delayed index's tick)
    max_delay_ms: int     # longest delay a message may ask for; 0: no limit

    @classmethod
    def of(cls, value: dict[str, Any]) -> DelayedDelivery:
        return cls(bool(value["active"]), int(value["tickTime"]), int(value.get("maxDeliveryDelayInMillis") or 0))

    def refusal(self, deliver_at_ms: int | None, publish_time_ms: int) -> NotAllowed | None:
        """Why a message must not be stored (Pulsar's text), or None: its delay (deliver_at
        minus its publish time, as Pulsar measures it) exceeds the limit."""
        if (not self.active or self.max_delay_ms <= 0 or deliver_at_ms is None
                or deliver_at_ms - publish_time_ms <= self.max_delay_ms):
            return None
        return NotAllowed(f"Exceeds max allowed delivery delay of {self.max_delay_ms} milliseconds",
                          deliver_at=deliver_at_ms, publish_time=publish_time_ms)


def check_delayed_delivery(body: object) -> dict[str, Any]:
    return obj(body, "delayedDelivery",
               {"active": boolean, "tickTime": _positive, "maxDeliveryDelayInMillis": _not_negative},
               {"active": True, "tickTime": 1000, "maxDeliveryDelayInMillis": 0})


def _delayed_default(config: Config) -> dict[str, Any]:
    return {"active": config.broker_delayed_delivery_enabled, "tickTime": config.broker_delayed_delivery_tick_ms,
            "maxDeliveryDelayInMillis": config.broker_delayed_delivery_max_delay_ms}


PERSISTENCE = PolicySpec(
    key="persistence", route="persistence", topic_route="persistence", check=check_persistence,
    check_config=_check_persistence_bounded,
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
