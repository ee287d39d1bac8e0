"""A small record of what the lifecycle policies deleted, so explain-storage can say so.

When the inactive-topic check deletes a topic or the subscription-expiration check removes a
subscription (`broker.retention.lifecycle`), one `Deletion` is appended to its namespace's record
in the metadata store (`ROOT/<tenant>/<namespace>`, a JSON list). Any broker can then answer
explain-storage of that topic: the topic is gone (404) but the answer says when and why, and
for a topic still there it lists the subscriptions expiration removed.

Bounds: at most `DELETIONS_MAX` entries per namespace, the oldest dropped first; one write (a
compare-and-set, retried on a concurrent writer) per deletion. A failed write is logged and
the deletion stands: the record is an explanation, never a condition.

What must hold: the list is in the order of the deletions' times as their brokers saw them and
never longer than `DELETIONS_MAX`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from common import retry
from common.errors import AlreadyExists, BadVersion, NotFound, StrataError
from common.topic_names import TopicName
from metadata.api import AsyncStore

log = logging.getLogger(__name__)

ROOT = "/strata/lifecycle-deletions"
DELETIONS_MAX = 100
INACTIVE = "inactiveTopicPolicies"              # reason: a topic deleted as inactive
EXPIRED = "subscriptionExpirationTimeMinutes"   # reason: a subscription removed as expired
_CAS_RETRY = retry.Retry("broker.lifecycle_record", retry_on=(), wait=retry.no_wait(), attempts_max=10)


@dataclass(frozen=True)
class Deletion:
    topic: str                     # the full topic (partition) name
    reason: str                    # INACTIVE or EXPIRED (the policy that acted)
    atMs: int
    detail: str                    # what the policy was and what the topic looked like, for people
    subscription: str | None = None   # the subscription removed (EXPIRED); None for a topic


def path_of(tenant: str, namespace: str) -> str:
    return f"{ROOT}/{tenant}/{namespace}"


async def record(astore: AsyncStore, name: TopicName, deletion: Deletion) -> None:
    """Append `deletion` to its namespace's record (logged, never raised, on failure)."""
    path = path_of(name.tenant, name.namespace)

    async def attempt() -> None:
        found = await astore.get(path)
        entries = json.loads(found.value) if found is not None else []
        entries = (entries + [asdict(deletion)])[-DELETIONS_MAX:]
        value = json.dumps(entries).encode()
        try:
            if found is None:
                await astore.create(path, value)
            else:
                await astore.put(path, value, expected_version=found.version)
        except (AlreadyExists, BadVersion, NotFound) as exc:   # another broker wrote meanwhile
            raise retry.TryAgain(str(exc)) from exc

    try:
        await _CAS_RETRY.call_async(attempt, give_up=lambda _: StrataError("record kept changing"))
    except StrataError as exc:
        log.warning("recording the deletion of %s: %s", name, exc)


async def of_namespace(astore: AsyncStore, tenant: str, namespace: str) -> list[Deletion]:
    found = await astore.get(path_of(tenant, namespace))
    if found is None:
        return []
    return [Deletion(**entry) for entry in json.loads(found.value)]


async def of_topic(astore: AsyncStore, name: TopicName) -> list[Deletion]:
    """The recorded deletions of the topic itself and of its subscriptions, oldest first."""
    return [d for d in await of_namespace(astore, name.tenant, name.namespace) if d.topic == str(name)]


def to_json(deletions: list[Deletion]) -> list[dict]:
    return [{k: v for k, v in asdict(d).items() if v is not None} for d in deletions]
