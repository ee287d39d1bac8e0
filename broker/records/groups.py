"""Consumer groups of the Kafka front end, as stored in the metadata store.

A Kafka consumer group is one record at `/kafka/groups/<group id, percent-quoted>`: its membership
as of the last completed rebalance (generation, chosen protocol, leader, members with their
subscription and assignment bytes) and the partitions where it holds a subscription. The committed
offsets are not here: each one is the mark-delete of the durable subscription named after the group
on its partition (`broker.topics.group_offsets`), so retention, TTL, backlog and explain-storage
see a Kafka group as they see any subscription.

Why the metadata store and not a system topic: the record changes only when a rebalance completes,
the group empties or a new partition is first committed (not on every commit), it is small, and
every broker must read it (a Pulsar consumer or an admin action on a group's subscription asks
whether the group is live) without loading a topic. The coordinator writes it with the version it
read, so two brokers that both believe they coordinate the group cannot both win.

What must hold: `StoredGroup.from_json(g.to_json()) == g`; member bytes round-trip exactly
(base64 in JSON); a group with members is `live`, and only the coordinator changes that.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from common.errors import MalformedPayload, NotFound

if TYPE_CHECKING:
    from metadata.api import AsyncStore

GROUPS_ROOT = "/kafka/groups"


def group_path(group_id: str) -> str:
    return f"{GROUPS_ROOT}/{urllib.parse.quote(group_id, safe='')}"


def group_of_path(path: str) -> str:
    return urllib.parse.unquote(path.rsplit("/", 1)[1])


@dataclass
class StoredMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    metadata: bytes          # the subscription bytes of the chosen protocol (carried, not read)
    assignment: bytes        # what the leader assigned it (carried, not read)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["metadata"] = base64.b64encode(self.metadata).decode()
        d["assignment"] = base64.b64encode(self.assignment).decode()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StoredMember:
        return cls(str(d["member_id"]), d.get("instance_id"), str(d.get("client_id", "")),
                   str(d.get("client_host", "")), int(d["session_timeout_ms"]), int(d["rebalance_timeout_ms"]),
                   base64.b64decode(d.get("metadata", "")), base64.b64decode(d.get("assignment", "")))


@dataclass
class StoredGroup:
    group_id: str
    state: str = "Empty"        # "Empty", "Stable" or "PreparingRebalance": what a new coordinator resumes
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: list[StoredMember] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)   # Pulsar topics holding its subscription
    updated_ms: int = 0

    @property
    def live(self) -> bool:
        return bool(self.members)

    def to_json(self) -> bytes:
        d = asdict(self)
        d["members"] = [m.to_dict() for m in self.members]
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> StoredGroup:
        try:
            d = json.loads(raw)
            return cls(str(d["group_id"]), str(d.get("state", "Empty")), int(d.get("generation", 0)),
                       str(d.get("protocol_type", "")), str(d.get("protocol", "")), str(d.get("leader", "")),
                       [StoredMember.from_dict(m) for m in d.get("members", [])],
                       [str(p) for p in d.get("partitions", [])], int(d.get("updated_ms", 0)))
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedPayload(f"a stored Kafka group does not parse: {exc}") from None


async def load(astore: AsyncStore, group_id: str) -> tuple[StoredGroup | None, int | None]:
    """The stored group and its version; (None, None) when never stored."""
    found = await astore.get(group_path(group_id))
    if found is None:
        return None, None
    return StoredGroup.from_json(found.value), found.version


async def save(astore: AsyncStore, group: StoredGroup, expected_version: int | None) -> int:
    """Write `group` if the stored version is still `expected_version` (None: create); BadVersion
    (or AlreadyExists) when another broker wrote it meanwhile. Returns the new version."""
    path = group_path(group.group_id)
    if expected_version is None:
        return await astore.create(path, group.to_json())
    return await astore.put(path, group.to_json(), expected_version=expected_version)


async def delete(astore: AsyncStore, group_id: str) -> None:
    try:
        await astore.delete(group_path(group_id))
    except NotFound:
        pass


async def all_ids(astore: AsyncStore) -> list[str]:
    return sorted(urllib.parse.unquote(name) for name in await astore.children(GROUPS_ROOT))


async def is_live(astore: AsyncStore, group_id: str) -> bool:
    """The group has members as of its last stored rebalance (its coordinator empties the record
    when the last member leaves or expires)."""
    group, _ = await load(astore, group_id)
    return group is not None and group.live
