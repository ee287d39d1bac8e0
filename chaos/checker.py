"""The checker: Jepsen's definitions over a chaos run's history, one `Verdict`.

    verdict = check(history.records(path), lease_s=10.0, orphans=find_orphans(...))
    verdict.valid, verdict.categories["lost"].count, verdict.to_json()

The parts (chaos/checks/): the log read back at the end (lost, split into prefix/middle/postfix,
duplicated, nonmonotonic, wrong bytes, incomplete read-back), the subscriptions (unseen,
per-key order on Key_Shared and Failover, redelivery after a persisted ack), the S3 objects
(orphans both ways, from chaos.orphans) and liveness (fault to next ack, stuck subscriptions);
with the Kafka workload, its own `kafka_*` categories and the group's recovery (chaos.checks.kafka).
Each category's docstring is in the module that fills it.

Valid means: no violation in any violation category (lost, duplicated, nonmonotonic, wrong
bytes, per-key order, redelivered after a persisted ack, orphans, missing objects, incomplete
read-back, unseen: the run drains before it checks, so a message a subscription never got is a
failure; and the Kafka workload's violations, when it ran). A check that could not run (no
orphan report given) is a failure too, never a pass. Liveness, and the Kafka group's recovery
(`Verdict.kafka`), are reported beside it (`Verdict.liveness.ok`, the issue's targets), not folded in.

What must hold: the verdict is a pure function of the records and the parameters; it never
reads a clock, and the same history gives the same verdict, examples included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.checks.findings import EXAMPLES_MAX, Category
from chaos.checks.kafka import KafkaVerdict, check_kafka
from chaos.checks.liveness import Liveness, check_liveness
from chaos.checks.log import check_log, log_categories
from chaos.checks.model import History, Record
from chaos.checks.subs import PERSIST_WINDOW_S, check_subs, sub_categories

if TYPE_CHECKING:
    from chaos.orphans import OrphanReport

STUCK_SLACK_S = 10.0      # a subscription is stuck after lease + this without a delivery


@dataclass
class Verdict:
    valid: bool
    categories: dict[str, Category]      # name -> count and examples, violations and informational
    liveness: Liveness
    stats: dict[str, Any] = field(default_factory=dict)     # what the history held
    params: dict[str, Any] = field(default_factory=dict)    # what it was judged with
    kafka: KafkaVerdict | None = None                       # the Kafka workload's stats and recovery

    @property
    def violations(self) -> list[str]:
        """Names of the categories that make the history invalid."""
        return [name for name, cat in self.categories.items() if cat.failed]

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "violations": self.violations, "liveness_ok": self.liveness.ok,
                "categories": {name: cat.to_json() for name, cat in self.categories.items()},
                "liveness": self.liveness.to_json(), "stats": self.stats, "params": self.params,
                "kafka": None if self.kafka is None else self.kafka.to_json()}


def check(records: Iterable[Record], *, lease_s: float, orphans: OrphanReport | None,
          stuck_s: float | None = None, persist_window_s: float = PERSIST_WINDOW_S,
          examples_max: int = EXAMPLES_MAX) -> Verdict:
    """Judge a merged history (`chaos.history.records`). `lease_s`: the cluster's
    `metadata_session_lease_ms` in seconds (the liveness bounds); `orphans`: what
    `chaos.orphans.find_orphans` found after the run (None: not checked, which is invalid);
    `stuck_s`: the longest quiet spell of a subscription with backlog and consumers (default:
    lease + 10 s); `persist_window_s`: how long after an ack it is surely persisted
    (chaos.checks.subs)."""
    records = list(records)
    history = History.of(records)
    stuck_s = lease_s + STUCK_SLACK_S if stuck_s is None else stuck_s
    categories = log_categories(examples_max)
    check_log(history, categories)
    categories.update(sub_categories(examples_max))
    check_subs(history, categories, persist_window_s)
    categories.update(_orphan_categories(orphans, examples_max))
    kafka = check_kafka(records, history.faults, categories, examples_max)
    liveness = check_liveness(history, lease_s, stuck_s, examples_max)
    valid = not any(cat.failed for cat in categories.values())
    params = {"lease_s": lease_s, "stuck_s": stuck_s, "persist_window_s": persist_window_s}
    return Verdict(valid, categories, liveness, _stats(history), params, kafka)


def _orphan_categories(report: OrphanReport | None, examples_max: int) -> dict[str, Category]:
    cats = {
        "orphans": Category("orphans", True, "S3 objects no ledger record names", examples_max=examples_max),
        "missing_objects": Category("missing_objects", True, "ledger records naming an object that is missing",
                                    examples_max=examples_max),
        "pending_objects": Category("pending_objects", False, "objects of ledgers being deleted or offloaded",
                                    examples_max=examples_max),
    }
    if report is None:
        for cat in cats.values():
            cat.checked = False
        return cats
    for key in report.orphans:
        cats["orphans"].add({"key": key})
    for ml_name, ledger_id, key in report.missing:
        cats["missing_objects"].add({"managed_ledger": ml_name, "ledger_id": ledger_id, "key": key})
    for key, why in report.pending:
        cats["pending_objects"].add({"key": key, "why": why})
    return cats


def _stats(history: History) -> dict[str, Any]:
    outcomes = Counter(send.outcome for send in history.sends)
    roles = Counter(f.role for f in history.faults)
    return {
        "sends": len(history.sends), "sends_ok": outcomes["ok"], "sends_failed": outcomes["failed"],
        "sends_unknown": outcomes["unknown"], "read_back": sum(len(rows) for rows in history.log.values()),
        "deliveries": len(history.deliveries), "acks": len(history.acks), "nacks": len(history.nacks),
        "partitions": len(history.parts()), "subscriptions": len(history.subscriptions()),
        "faults": len(history.faults), "faults_by_role": dict(sorted(roles.items())),
        "faults_unhealed": sum(1 for f in history.faults if f.heal is None),
        "t_begin": history.t_begin, "t_end": history.t_end, "duration_s": history.t_end - history.t_begin,
    }
