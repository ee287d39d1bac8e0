"""Topic names: parsing, validation and the metadata paths derived from them.

A topic is `persistent://tenant/namespace/local` or `non-persistent://tenant/namespace/local` (an
in-memory fan-out topic, `broker.nonpersistent.topic`). Clients normalise short names before they send
them, but admin paths and tools may not, so `parse_topic` also expands `local` to
`persistent://public/default/local` and `tenant/ns/local` to `persistent://tenant/ns/local` (a
short name is always persistent, as in Pulsar).
Partition i of a partitioned topic is the ordinary topic `<local>-partition-<i>`.

Where topics are recorded in the metadata store (written by the broker, read by `analytics/` too):
`PARTITIONED_ROOT/<tenant>/<ns>/<topic>` = `{"partitions": N}` for a partitioned topic, and
`TOPICS_ROOT/<tenant>/<ns>/<topic>` for every (partition) topic ever created (`broker.records.policies`).

What must hold: a `TopicName` that exists is valid — each part is non-empty and uses only
`[A-Za-z0-9_.:=%-]`, so every part can be used as a metadata path segment unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.errors import InvalidTopicName

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITION_SUFFIX = "-partition-"
NAME_BYTES_MAX = 512
PARTITIONED_ROOT = "/admin/partitioned-topics"
PERSISTENT = "persistent"
NON_PERSISTENT = "non-persistent"
DOMAINS = (PERSISTENT, NON_PERSISTENT)
TOPICS_ROOT = "/topics"

_PART = re.compile(r"^[A-Za-z0-9_.:=%-]+$")
_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d{1,6})$")


@dataclass(frozen=True)
class TopicName:
    domain: str       # PERSISTENT or NON_PERSISTENT
    tenant: str
    namespace: str
    local: str        # includes the -partition-N suffix for a partition

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def persistent(self) -> bool:
        """False for a `non-persistent://` topic (nothing stored: `broker.nonpersistent.topic`)."""
        return self.domain == PERSISTENT

    @property
    def partition_index(self) -> int:
        """Index of this partition, or -1 when the name is not a partition."""
        match = _PARTITION.match(self.local)
        return int(match.group("index")) if match else -1

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself when not a partition)."""
        match = _PARTITION.match(self.local)
        if not match:
            return self
        return TopicName(self.domain, self.tenant, self.namespace, match.group("base"))

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local}{PARTITION_SUFFIX}{index}")

    @property
    def path(self) -> str:
        """`tenant/ns/local`, a relative metadata path (each part is a valid segment)."""
        return f"{self.tenant}/{self.namespace}/{self.local}"

    @property
    def managed_ledger_name(self) -> str:
        """Name of the managed ledger that stores this topic."""
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.local}"


def _check_part(kind: str, value: str, full: str) -> None:
    if not value or not _PART.fullmatch(value) or value in (".", ".."):
        raise InvalidTopicName(f"invalid {kind} in topic name", topic=full)


def parse_topic(text: str) -> TopicName:
    """Parse and validate a topic name; raise InvalidTopicName if it is not one."""
    if not isinstance(text, str) or not text or len(text.encode()) > NAME_BYTES_MAX:
        raise InvalidTopicName("empty or overlong topic name", topic=str(text)[:80])
    domain = PERSISTENT
    rest = text
    if "://" in text:
        domain, _, rest = text.partition("://")
        if domain not in DOMAINS:
            raise InvalidTopicName("only persistent:// and non-persistent:// topics exist", topic=text)
        parts = rest.split("/")
        if len(parts) != 3:
            raise InvalidTopicName(f"expected {domain}://tenant/namespace/topic", topic=text)
    else:
        parts = rest.split("/")
        if len(parts) == 1:
            parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]]
        elif len(parts) != 3:
            raise InvalidTopicName("expected topic or tenant/namespace/topic", topic=text)
    tenant, namespace, local = parts
    _check_part("tenant", tenant, text)
    _check_part("namespace", namespace, text)
    _check_part("topic", local, text)
    return TopicName(domain, tenant, namespace, local)


def parse_namespace(text: str) -> tuple[str, str]:
    """`tenant/ns` -> (tenant, ns); raise InvalidTopicName for anything else."""
    parts = text.split("/") if isinstance(text, str) else []
    if len(parts) != 2:
        raise InvalidTopicName("expected tenant/namespace", namespace=str(text)[:80])
    for kind, value in zip(("tenant", "namespace"), parts):
        _check_part(kind, value, text)
    return parts[0], parts[1]
