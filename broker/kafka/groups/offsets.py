"""Committing and reading a group's offsets on the brokers that serve its partitions.

The coordinator of a group is one broker; the partitions it commits on may be served by others.
Each partition's subscription is changed where the partition is served: here through
`broker.topics.group_offsets`, elsewhere through that broker's admin endpoint
`POST /admin/v2/kafka/groups/{group}/offsets` (one call per broker for all its partitions, with
this broker's peer credentials). A partition whose owner moved meanwhile is tried once more after
a fresh lookup.

Errors come back per partition as Kafka codes: a retriable failure (an owner moving, a broker
unreachable) is COORDINATOR_LOAD_IN_PROGRESS, which every client retries; Pulsar consumers on the
subscription are INCONSISTENT_GROUP_PROTOCOL (logged with the reason).

What must hold: a commit answered without error is durable on the partition's owner; a partition
is never changed by a broker that does not serve it.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.cluster.peers import owner_elsewhere, peer_call
from broker.topics import group_offsets
from common import errors as e
from common.topic_names import TopicName
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)
ATTEMPTS = 2


@dataclass
class Item:
    name: TopicName                  # the Pulsar topic holding the partition
    offset: int = -1
    metadata: str = ""
    error: int = ErrorCode.NONE
    found: bool = False

    def wire(self) -> dict[str, Any]:
        return {"topic": str(self.name), "offset": self.offset, "metadata": self.metadata}


_FINAL: tuple[tuple[type[e.StrataError], int], ...] = (
    (e.AuthorizationDenied, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (e.TopicNotFound, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (e.NamespaceNotFound, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (e.InvalidTopicName, ErrorCode.INVALID_TOPIC_EXCEPTION),
)


def _code(code: int, message: str) -> int:
    """A partition's failure as the code its client should act on. Everything but the final
    refusals is retried (COORDINATOR_LOAD_IN_PROGRESS): the partition moving (a fenced cursor or
    ledger, an owner changing), a store or bookie away; the client commits or fetches again."""
    exc = e.error_from_code(code, message)
    if isinstance(exc, e.ConsumerBusy):
        log.warning("kafka group offsets: %s", message)
        return int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    for cls, kafka_code in _FINAL:
        if isinstance(exc, cls):
            return int(kafka_code)
    log.info("kafka group offsets: retried by the client: %s", exc)
    return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


class GroupOffsets:
    def __init__(self, service: BrokerService) -> None:
        self._service = service

    async def run(self, op: str, group: str, items: list[Item]) -> None:
        """Run `op` ("commit", "fetch", "forget") on every item, filling its outcome in place."""
        todo = list(items)
        for attempt in range(ATTEMPTS):
            retry: list[Item] = []
            by_owner: dict[str | None, list[Item]] = {}
            for item in todo:
                try:
                    url = await owner_elsewhere(self._service, item.name, assign=True)
                except e.StrataError as exc:
                    item.error = _code(exc.code, exc.message)
                    continue
                by_owner.setdefault(url, []).append(item)
            await asyncio.gather(*(self._on(url, op, group, batch) for url, batch in by_owner.items()))
            for item in todo:
                if item.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and attempt + 1 < ATTEMPTS:
                    item.error = ErrorCode.NONE
                    retry.append(item)
            if not retry:
                return
            todo = retry

    async def _on(self, url: str | None, op: str, group: str, batch: list[Item]) -> None:
        wire = [item.wire() for item in batch]
        if url is None:
            answers = await group_offsets.apply(self._service.get_topic, op, group, wire)
        else:
            path = f"/admin/v2/kafka/groups/{urllib.parse.quote(group, safe='')}/offsets"
            status, body = await peer_call(url, "POST", path, body={"op": op, "partitions": wire},
                                           config=self._service.config)
            if status != 200 or not isinstance(body, dict):
                log.info("kafka group %s: %s on %s failed: %s", group, op, url, body)
                for item in batch:
                    item.error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                return
            answers = list(body.get("partitions") or [])
        for item, answer in zip(batch, answers, strict=False):
            error = answer.get("error")
            if error:
                item.error = _code(int(error.get("code", 0)), str(error.get("message", "")))
                continue
            item.found = bool(answer.get("found"))
            if op == "fetch":
                item.offset = int(answer.get("offset", -1))
                item.metadata = str(answer.get("metadata") or "")
        for item in batch[len(answers):]:
            item.error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
