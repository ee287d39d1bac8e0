"""Where an offloaded ledger lives in the bucket: managed ledger name -> object keys, and back.

Layout (one object per offloaded ledger; `{prefix}` is `offload_s3_prefix`, default "strata"):

    {prefix}/{tenant}/{namespace}/{topic}/ledger-{ledger_id:020d}.parquet
    {prefix}/{tenant}/{namespace}/{topic}/partition-{i}/ledger-{ledger_id:020d}.parquet

The second form is partition i of the partitioned topic `{topic}` (the managed ledger
`tenant/namespace/persistent/{topic}-partition-{i}`), so an engine reads a whole partitioned
topic as one table under `{prefix}/{tenant}/{namespace}/{topic}/` (partitions as sub-folders),
and a non-partitioned topic as the objects directly under its folder. Ledger ids are
zero-padded to 20 digits so the keys sort in ledger (= write) order. Nothing but ledger
objects is written into a topic's folder; the start-up access probe (`S3Bucket.check_access`)
writes and deletes `{prefix}/_probe/{random}`, outside every topic folder.

What must hold: `ledger_key` and `ledger_id_of` are inverse; keys of different managed ledgers
never share their topic folder's direct children.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.errors import InvalidArgument

_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d{1,6})$")
_LEDGER_FILE = re.compile(r"ledger-(?P<id>\d{20})\.parquet")
LEDGER_ID_MAX = 10 ** 20 - 1


@dataclass(frozen=True)
class TopicOfLedger:
    """What a managed ledger name says about its topic."""
    tenant: str
    namespace: str
    local: str            # the topic's local name, "-partition-N" included for a partition
    base: str             # the partitioned topic's local name (== local when not a partition)
    partition: int        # partition index, -1 when the topic is not a partition

    @property
    def full_name(self) -> str:
        """`persistent://tenant/namespace/local` (the partition's own name for a partition)."""
        return f"persistent://{self.tenant}/{self.namespace}/{self.local}"


def parse_ml_name(ml_name: str) -> TopicOfLedger:
    """`tenant/namespace/persistent/local` -> its parts (InvalidArgument for anything else)."""
    parts = ml_name.split("/")
    if len(parts) != 4 or parts[2] != "persistent" or not all(parts):
        raise InvalidArgument("managed ledger name is not tenant/namespace/persistent/topic", ml_name=ml_name)
    tenant, namespace, _, local = parts
    match = _PARTITION.match(local)
    if match:
        return TopicOfLedger(tenant, namespace, local, match.group("base"), int(match.group("index")))
    return TopicOfLedger(tenant, namespace, local, local, -1)


def topic_origin(ml_name: str) -> tuple[str, int]:
    """(full topic name, partition index or -1): what the format's LedgerOrigin records."""
    topic = parse_ml_name(ml_name)
    return topic.full_name, topic.partition


def topic_prefix(prefix: str, ml_name: str) -> str:
    """The folder (ending in "/") that holds the managed ledger's objects and nothing else."""
    topic = parse_ml_name(ml_name)
    folder = (f"{topic.tenant}/{topic.namespace}/{topic.base}/partition-{topic.partition}/"
              if topic.partition >= 0 else f"{topic.tenant}/{topic.namespace}/{topic.local}/")
    prefix = prefix.strip("/")
    return f"{prefix}/{folder}" if prefix else folder


def ledger_key(prefix: str, ml_name: str, ledger_id: int) -> str:
    """The object key of one offloaded ledger."""
    if not 0 <= ledger_id <= LEDGER_ID_MAX:
        raise InvalidArgument("ledger id out of range", ledger_id=ledger_id)
    return f"{topic_prefix(prefix, ml_name)}ledger-{ledger_id:020d}.parquet"


def ledger_id_of(key: str) -> int | None:
    """The ledger id a key names, or None if the key is not an offloaded ledger's object."""
    match = _LEDGER_FILE.fullmatch(key.rsplit("/", 1)[-1])
    return int(match.group("id")) if match else None
