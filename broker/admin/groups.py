"""Kafka consumer groups in the admin API: what operators and the console read, and the call a
group coordinator makes on the broker that serves a partition.

- `GET  /admin/v2/kafka/groups` → `["group", ...]`: every group stored in the metadata store
  (`broker.records.groups`), sorted.
- `GET  /admin/v2/kafka/groups/{group}` → the stored record: `{"groupId", "state", "generation",
  "protocolType", "protocol", "leader", "members": [{"memberId", "instanceId", "clientId",
  "clientHost", "sessionTimeoutMs", "rebalanceTimeoutMs"}], "partitions", "updatedMs", "live"}`.
  The members' subscription and assignment bytes are not shown (they are the clients' own
  encoding). 404 for a group never stored.
- `POST /admin/v2/kafka/groups/{group}/offsets` with `{"op": "commit"|"fetch"|"forget",
  "partitions": [{"topic": "persistent://t/ns/x-partition-0", "offset": 5, "metadata": "m"}]}`
  (`offset` and `metadata` for a commit only; `metadata` may be absent or null) → 200
  `{"partitions": [...]}`: `broker.topics.group_offsets.apply`'s answer, one per item in order,
  `{"topic", "offset", "metadata", "found"}` or `{"topic", "error": {"code", "message"}}` (a
  partition this broker does not serve answers its OwnedElsewhere code: the caller asks the
  owner). The coordinator of a group calls it (`broker.cluster.peers.peer_call`) on the broker
  that serves partitions it does not. A body that is not that shape is a 400 naming what is wrong,
  and nothing is done: every item is checked before the first is applied.

Group ids are percent-quoted in the path (`urllib.parse.quote(group, safe="")`): a Kafka group id
may hold any character. All three routes are superuser-only (`broker.admin.access`): the peer call
carries the calling broker's own credentials, and the reads list groups of every tenant, as
`broker-stats/topics` lists every topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from broker.admin.http import body_json
from broker.records import groups
from broker.topics import group_offsets
from common.errors import BadRequestBody, NotFound

if TYPE_CHECKING:
    from broker.service import BrokerService

GROUPS_ROUTE = "/admin/v2/kafka/groups"
_BODY_SHAPE = ('{"op": "commit"|"fetch"|"forget", "partitions": [{"topic": "persistent://...", '
               '"offset": 5, "metadata": "..."}]}')


def register(app: web.Application, service: BrokerService) -> None:
    r = _GroupRoutes(service)
    app.router.add_get(GROUPS_ROUTE, r.list_groups)
    app.router.add_get(GROUPS_ROUTE + "/{group}", r.get_group)
    app.router.add_post(GROUPS_ROUTE + "/{group}/offsets", r.offsets)


def record_json(group: groups.StoredGroup) -> dict[str, Any]:
    """The stored record in the admin API's words (camelCase; members without their bytes)."""
    return {
        "groupId": group.group_id, "state": group.state, "generation": group.generation,
        "protocolType": group.protocol_type, "protocol": group.protocol, "leader": group.leader,
        "members": [{"memberId": m.member_id, "instanceId": m.instance_id, "clientId": m.client_id,
                     "clientHost": m.client_host, "sessionTimeoutMs": m.session_timeout_ms,
                     "rebalanceTimeoutMs": m.rebalance_timeout_ms} for m in group.members],
        "partitions": list(group.partitions), "updatedMs": group.updated_ms, "live": group.live,
    }


def offsets_request(body: object) -> tuple[str, list[dict[str, Any]]]:
    """(op, items) of an offsets body; BadRequestBody (400) naming the first thing wrong."""
    if not isinstance(body, dict):
        raise BadRequestBody(f"a group offsets body is {_BODY_SHAPE}")
    op = body.get("op")
    if op not in group_offsets.OPS:
        raise BadRequestBody(f"op must be one of {', '.join(group_offsets.OPS)}, not {op!r}")
    items = body.get("partitions")
    if not isinstance(items, list):
        raise BadRequestBody(f"partitions must be a list, as in {_BODY_SHAPE}")
    for i, item in enumerate(items):
        _check_item(op, i, item)
    return op, items


def _check_item(op: str, i: int, item: object) -> None:
    if not isinstance(item, dict):
        raise BadRequestBody(f"partitions[{i}] must be an object, not {item!r}")
    if not isinstance(item.get("topic"), str) or not item["topic"]:
        raise BadRequestBody(f"partitions[{i}].topic must be a topic name, not {item.get('topic')!r}")
    if op != "commit":
        return
    offset = item.get("offset")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise BadRequestBody(f"partitions[{i}].offset must be an integer, not {offset!r}")
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, str):
        raise BadRequestBody(f"partitions[{i}].metadata must be a string or null, not {metadata!r}")
    size_bytes = len(metadata.encode()) if metadata is not None else 0
    if size_bytes > group_offsets.METADATA_CHARS_MAX:      # the coordinator answers it per partition first
        raise BadRequestBody(f"partitions[{i}].metadata is {size_bytes} bytes, over the "
                             f"{group_offsets.METADATA_CHARS_MAX} a commit keeps (offset.metadata.max.bytes)")


class _GroupRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def list_groups(self, request: web.Request) -> web.Response:
        return web.json_response(await groups.all_ids(self.service.astore))

    async def get_group(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        group, _version = await groups.load(self.service.astore, group_id)
        if group is None:
            raise NotFound(f"Kafka consumer group {group_id!r} not found")
        return web.json_response(record_json(group))

    async def offsets(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        op, items = offsets_request(await body_json(request))
        answers = await group_offsets.apply(self.service.get_topic, op, group_id, items)
        return web.json_response({"partitions": answers})
