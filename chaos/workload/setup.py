"""Prepare a cluster for a workload plan: namespace policies, topics, subscriptions; broker settings.

    cluster = LocalCluster.start(..., env={**BROKER_ENV, ...})   # small ledgers: the brokers' settings
    prepare(AdminClient(cluster.admin_urls[0]), plan)            # before any workload process starts

`prepare` makes (idempotently: what exists is left as it is) the tenant and namespace, and sets on
the namespace:
- deduplication on (the producers' fixed names and explicit sequence ids rely on it);
- retention unlimited (-1 minutes, -1 MB): the whole log stays readable, so trimming can never
  be mistaken for loss by the final read-back;
- offloadThreshold OFFLOAD_THRESHOLD_BYTES (0: every closed ledger goes to S3 as soon as it
  closes; refused by a broker without a cold tier, in which case `prepare` raises) and
  offloadDeletionLagMs OFFLOAD_DELETION_LAG_MS, so bookie copies are deleted during the run and
  reads of old messages come from S3.
Then the partitioned topics, and every subscription of the plan at the earliest position (which
also creates each plain topic): "unseen" is well defined from the first message sent.

Ledger size is not a namespace policy in Pulsar nor in Strata: the rollover thresholds are broker
settings (common.config `managed_ledger_rollover_*`), so BROKER_ENV holds the STRATA_* variables
the runner must give every broker: a ledger rolls over after ROLLOVER_ENTRIES entries (seconds at
the plan's rate) or ROLLOVER_AGE_MS, with no minimum age; the retention pass (which deletes the
offloaded bookie copies) runs every few seconds; dedup snapshots are taken often, so a broker
taking over a topic recovers its dedup state from a snapshot plus a short replay.
"""

from __future__ import annotations

from admin_client import AdminClient
from chaos.workload.plan import WorkloadPlan
from common.errors import AdminConflict

ROLLOVER_ENTRIES = 300
ROLLOVER_AGE_MS = 20_000
OFFLOAD_THRESHOLD_BYTES = 0
OFFLOAD_DELETION_LAG_MS = 10_000
EARLIEST = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}   # Pulsar's MessageIdImpl.earliest

BROKER_ENV = {
    "STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
    "STRATA_MANAGED_LEDGER_ROLLOVER_AGE_MS": str(ROLLOVER_AGE_MS),
    "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
    "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "5000",
    "STRATA_BROKER_DEDUP_SNAPSHOT_INTERVAL_ENTRIES": "100",
}


def _put(admin: AdminClient, path: str, body: object = None) -> None:
    """PUT that tolerates 409 (it exists already)."""
    try:
        admin.call("PUT", path, body)
    except AdminConflict:
        pass


def prepare(admin: AdminClient, plan: WorkloadPlan) -> None:
    """Namespace, policies, topics and subscriptions of `plan` (module docstring); AdminError when
    the cluster refuses one."""
    tenant = plan.namespace.split("/", 1)[0]
    ns_path = f"/admin/v2/namespaces/{plan.namespace}"
    clusters = admin.call("GET", "/admin/v2/clusters")
    _put(admin, f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": clusters})
    _put(admin, ns_path)
    admin.call("POST", ns_path + "/deduplication", True)
    admin.call("POST", ns_path + "/retention", {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    admin.call("PUT", ns_path + "/offloadThreshold", OFFLOAD_THRESHOLD_BYTES)
    admin.call("PUT", ns_path + "/offloadDeletionLagMs", OFFLOAD_DELETION_LAG_MS)
    for topic in plan.topics:
        path = "/admin/v2/" + topic.topic.replace("://", "/", 1)
        if topic.partitions:
            _put(admin, path + "/partitions", topic.partitions)
        for sub in (s for s in plan.subscriptions if s.topic == topic.topic):
            _put(admin, f"{path}/subscription/{sub.name}", EARLIEST)
