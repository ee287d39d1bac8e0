"""The group requests: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.

Each handler turns the request body into a call on the coordinator's `Group` (or on the offsets of
its partitions) and the outcome into the response body of the request's version. A group not
coordinated here is NOT_COORDINATOR (the client finds the coordinator again); one that cannot be
read from the metadata store now is COORDINATOR_LOAD_IN_PROGRESS (retried).

FindCoordinator for transactions (key type 1) is refused with INVALID_REQUEST and a message:
Strata has no Kafka transactions (idempotent producers need none).

Authorization: committing, fetching and deleting offsets of a partition needs CONSUME on its
topic (the same grant a Pulsar subscription needs); joining a group needs no grant of its own.

What must hold: every request gets exactly one answer in its version's shape; a group's state is
stored after every change a successor needs (`GroupCoordinator.changed`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Any

from broker.kafka import metadata
from broker.kafka.groups.coordinator import NotCoordinator
from broker.kafka.groups.group import Group, State
from broker.kafka.groups.offsets import Item
from broker.kafka.topics import kafka_name, partition_topic, pulsar_name
from broker.security.authorization import Action
from broker.topics.group_offsets import METADATA_CHARS_MAX
from common import errors as e
from common.topic_names import parse_topic
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from wire.kafka.codec import Request

log = logging.getLogger(__name__)
KEY_GROUP, KEY_TRANSACTION = 0, 1


def _now(conn: KafkaConnection) -> float:
    return conn.front.ctx.clock.monotonic_s()


async def _parked(future: asyncio.Future) -> dict:
    """Wait for a parked join or sync; a closing connection cancels only its own wait."""
    return await asyncio.shield(future)


# --- FindCoordinator ---------------------------------------------------------------------------------

async def find_coordinator(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    key_type = int(body.get("key_type", KEY_GROUP) or 0)
    keys = list(body.get("coordinator_keys") or []) if req.api_version >= 4 else [body.get("key") or ""]
    answers = [await _coordinator_for(conn, key, key_type) for key in keys]
    if req.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": answers}
    one = answers[0]
    return {"throttle_time_ms": 0, "error_code": one["error_code"], "error_message": one["error_message"],
            "node_id": one["node_id"], "host": one["host"], "port": one["port"]}


async def _coordinator_for(conn: KafkaConnection, key: str, key_type: int) -> dict:
    out: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": 0, "error_message": None}
    if key_type == KEY_TRANSACTION:
        out.update(error_code=int(ErrorCode.INVALID_REQUEST),
                   error_message="Kafka transactions are not supported by Strata (idempotent producers are)")
        return out
    if key_type != KEY_GROUP:
        out.update(error_code=int(ErrorCode.INVALID_REQUEST), error_message=f"unknown coordinator key type {key_type}")
        return out
    if not key:
        out.update(error_code=int(ErrorCode.INVALID_GROUP_ID), error_message="the group id is empty")
        return out
    front = conn.front
    try:
        answer = await front.ownership.resolve(front.groups.placement(key), authoritative=False)
    except e.StrataError as exc:
        out.update(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), error_message=str(exc))
        return out
    listed, ids = metadata.brokers(conn)
    node = ids.get(answer.native_url)
    entry = next((b for b in listed if b["node_id"] == node), None)
    if entry is None:
        out.update(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                   error_message="the coordinating broker has no Kafka listener for this client")
        return out
    out.update(node_id=entry["node_id"], host=entry["host"], port=entry["port"])
    return out


# --- membership ----------------------------------------------------------------------------------------

async def _group(conn: KafkaConnection, group_id: str, *, create: bool) -> Group | None:
    return await conn.front.groups.group(group_id, create=create)


async def join_group(conn: KafkaConnection, req: Request) -> Any:
    body = req.body
    group_id = body.get("group_id") or ""
    failed: dict[str, Any] = {"throttle_time_ms": 0, "generation_id": -1, "protocol_type": None, "protocol_name": "",
              "leader": "", "skip_assignment": False, "member_id": body.get("member_id") or "", "members": []}
    if not group_id:
        return {**failed, "error_code": int(ErrorCode.INVALID_GROUP_ID)}
    try:
        g = await _group(conn, group_id, create=True)
    except NotCoordinator as nc:
        return {**failed, "error_code": nc.code}
    assert g is not None
    session = int(body.get("session_timeout_ms", 0))
    rebalance = int(body.get("rebalance_timeout_ms", -1)) if req.api_version >= 1 else session
    protocols = [(p.get("name") or "", bytes(p.get("metadata") or b"")) for p in body.get("protocols") or []]
    outcome = g.join(member_id=body.get("member_id") or "", instance_id=body.get("group_instance_id"),
                     client_id=conn.client_id or "", client_host="/" + conn.peer.rsplit(":", 1)[0],
                     session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                     protocol_type=body.get("protocol_type") or "", protocols=protocols,
                     version=req.api_version, now=_now(conn), loop=asyncio.get_running_loop())
    conn.front.groups.changed(g)
    if isinstance(outcome, dict):
        return {**failed, **outcome}
    return _join_answer(conn, g, outcome, failed)


async def _join_answer(conn: KafkaConnection, g: Group, future: asyncio.Future, failed: dict) -> dict:
    reply = await _parked(future)
    conn.front.groups.changed(g)
    return {**failed, **reply}


async def sync_group(conn: KafkaConnection, req: Request) -> Any:
    body = req.body
    failed = {"throttle_time_ms": 0, "protocol_type": None, "protocol_name": None, "assignment": b""}
    try:
        g = await _group(conn, body.get("group_id") or "", create=False)
    except NotCoordinator as nc:
        return {**failed, "error_code": nc.code}
    if g is None:
        return {**failed, "error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)}
    assignments = {a.get("member_id") or "": bytes(a.get("assignment") or b"") for a in body.get("assignments") or []}
    outcome = g.sync(member_id=body.get("member_id") or "", instance_id=body.get("group_instance_id"),
                     generation=int(body.get("generation_id", -1)), protocol_type=body.get("protocol_type"),
                     protocol_name=body.get("protocol_name"), assignments=assignments, now=_now(conn),
                     loop=asyncio.get_running_loop())
    conn.front.groups.changed(g)
    if isinstance(outcome, dict):
        return {**failed, **outcome}
    return _sync_answer(outcome, failed)


async def _sync_answer(future: asyncio.Future, failed: dict) -> dict:
    return {**failed, **(await _parked(future))}


async def heartbeat(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    try:
        g = await _group(conn, body.get("group_id") or "", create=False)
    except NotCoordinator as nc:
        return {"throttle_time_ms": 0, "error_code": nc.code}
    if g is None:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.UNKNOWN_MEMBER_ID)}
    code = g.heartbeat(member_id=body.get("member_id") or "", instance_id=body.get("group_instance_id"),
                       generation=int(body.get("generation_id", -1)), now=_now(conn))
    return {"throttle_time_ms": 0, "error_code": code}


async def leave_group(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    if req.api_version >= 3:
        leaving = [(m.get("member_id") or "", m.get("group_instance_id")) for m in body.get("members") or []]
    else:
        leaving = [(body.get("member_id") or "", None)]
    try:
        g = await _group(conn, body.get("group_id") or "", create=False)
    except NotCoordinator as nc:
        return {"throttle_time_ms": 0, "error_code": nc.code, "members": []}
    codes = g.leave(leaving, _now(conn)) if g is not None else [int(ErrorCode.UNKNOWN_MEMBER_ID)] * len(leaving)
    if g is not None:       # stored before the answer: an admin action right after a close sees it empty
        await conn.front.groups.flush(g)
    members = [{"member_id": mid, "group_instance_id": iid, "error_code": code}
               for (mid, iid), code in zip(leaving, codes, strict=True)]
    top = codes[0] if req.api_version < 3 and codes else 0
    return {"throttle_time_ms": 0, "error_code": top, "members": members}


# --- offsets ---------------------------------------------------------------------------------------

async def _items(conn: KafkaConnection, topics: list[tuple[str, list[dict]]]) -> list[tuple[str, dict, Item | None]]:
    """(kafka topic, partition dict, the Item or None when it failed here with item error set in
    the dict as "error_code")."""
    front = conn.front
    out: list[tuple[str, dict, Item | None]] = []
    for topic_name, partitions in topics:
        failed = 0
        try:
            base = pulsar_name(topic_name, conn.default_namespace)
            layout = await front.catalog.layout(base)
        except e.InvalidTopicName:
            layout, base = None, None
        except e.StrataError as exc:            # the metadata store away: retried by the client
            log.info("kafka group offsets: %s: %s", topic_name, exc)
            layout, base, failed = None, None, int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        for p in partitions:
            index = int(p.get("partition_index", 0))
            if base is None or layout is None or not 0 <= index < layout[0]:
                code = failed or int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                out.append((topic_name, {**p, "error_code": code}, None))
                continue
            name = partition_topic(base, layout[1], index)
            try:
                allowed = await front.authorization.allowed(conn.role, Action.CONSUME, name)
            except e.StrataError as exc:
                log.info("kafka group offsets: %s: %s", name, exc)
                out.append((topic_name, {**p, "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)}, None))
                continue
            if not allowed:
                out.append((topic_name, {**p, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}, None))
                continue
            out.append((topic_name, p, Item(name)))
    return out


def _by_topic(rows: list[tuple[str, dict]]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for name, partition in rows:
        topics.setdefault(name, []).append(partition)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


async def offset_commit(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    group_id = body.get("group_id") or ""
    topics = [(t.get("name") or "", list(t.get("partitions") or [])) for t in body.get("topics") or []]

    def all_failed(code: int) -> dict:
        return {"throttle_time_ms": 0, "topics": _by_topic(
            [(name, {"partition_index": int(p.get("partition_index", 0)), "error_code": code})
             for name, parts in topics for p in parts])}

    if not group_id:
        return all_failed(ErrorCode.INVALID_GROUP_ID)
    coordinator = conn.front.groups
    try:
        g = await _group(conn, group_id, create=True)
    except NotCoordinator as nc:
        return all_failed(nc.code)
    assert g is not None
    code = g.commit_check(body.get("member_id") or "", body.get("group_instance_id"),
                          int(body.get("generation_id_or_member_epoch", -1)), _now(conn))
    if code:
        return all_failed(code)
    rows = await _items(conn, topics)
    todo = []
    for _name, p, item in rows:
        if item is None:
            continue
        metadata_text = p.get("committed_metadata") or ""
        if len(metadata_text.encode()) > METADATA_CHARS_MAX:
            p["error_code"] = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            continue
        item.offset, item.metadata = int(p.get("committed_offset", -1)), metadata_text
        todo.append(item)
    await coordinator.offsets.run("commit", group_id, todo)
    added = [str(i.name) for i in todo if i.error == ErrorCode.NONE and str(i.name) not in g.partitions]
    if added:
        g.partitions.extend(added)
        g.dirty = True
        await coordinator.flush(g)
    answers = []
    for name, p, item in rows:
        err = p.get("error_code", 0) if item is None or "error_code" in p else int(item.error)
        answers.append((name, {"partition_index": int(p.get("partition_index", 0)), "error_code": int(err)}))
    return {"throttle_time_ms": 0, "topics": _by_topic(answers)}


async def offset_fetch(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    if req.api_version >= 8:
        groups = [await _fetch_group(conn, g.get("group_id") or "", g.get("topics")) for g in body.get("groups") or []]
        return {"throttle_time_ms": 0, "groups": [
            {"group_id": gid, "error_code": code,
             "topics": [{"name": t["name"], "partitions": t["partitions"]} for t in topics]}
            for gid, code, topics in groups]}
    _gid, code, topics = await _fetch_group(conn, body.get("group_id") or "", body.get("topics"))
    return {"throttle_time_ms": 0, "error_code": code, "topics": topics}


async def _fetch_group(conn: KafkaConnection, group_id: str, wanted: list[dict] | None) -> tuple[str, int, list[dict]]:
    coordinator = conn.front.groups
    if not group_id:
        return group_id, int(ErrorCode.INVALID_GROUP_ID), []
    try:
        g = await _group(conn, group_id, create=False)
    except NotCoordinator as nc:
        return group_id, nc.code, []
    if wanted is None:                     # every partition it has offsets on
        stored = g.partitions if g is not None else []
        by_topic: dict[str, list[dict]] = {}
        for text in stored:
            name = parse_topic(text)
            index = max(name.partition_index, 0)
            by_topic.setdefault(kafka_name(name, conn.default_namespace), []).append({"partition_index": index})
        topics = list(by_topic.items())
    else:
        topics = [(t.get("name") or "", [{"partition_index": int(i)} for i in t.get("partition_indexes") or []])
                  for t in wanted]
    rows = await _items(conn, topics)
    todo = [item for _n, _p, item in rows if item is not None]
    await coordinator.offsets.run("fetch", group_id, todo)
    if any(i.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for i in todo):
        return group_id, int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), []
    answers: list[tuple[str, dict]] = []
    for topic_name, p, item in rows:
        out: dict[str, Any] = {"partition_index": int(p.get("partition_index", 0)), "committed_offset": -1,
               "committed_leader_epoch": -1, "metadata": "", "error_code": int(p.get("error_code", 0))}
        if item is not None:
            out["error_code"] = int(item.error)
            if item.found and item.error == ErrorCode.NONE:
                out["committed_offset"], out["metadata"] = item.offset, item.metadata
        if wanted is None and out["committed_offset"] < 0:
            continue
        answers.append((topic_name, out))
    return group_id, 0, _by_topic(answers)


# --- administration ----------------------------------------------------------------------------------

async def list_groups(conn: KafkaConnection, req: Request) -> dict:
    """The groups this broker coordinates (admin clients ask every broker and merge)."""
    coordinator = conn.front.groups
    states = {s.lower() for s in req.body.get("states_filter") or []}
    types = {t.lower() for t in req.body.get("types_filter") or []}
    out = []
    try:
        ids = await coordinator.all_ids()
    except e.StrataError:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "groups": []}
    for group_id in ids:
        if not await coordinator.coordinated_here(group_id):
            continue
        g = coordinator.groups.get(group_id)
        if g is not None:
            state, protocol_type = g.state.value, g.protocol_type
        else:
            stored = await coordinator.stored_group(group_id)
            if stored is None:
                continue
            state = "Stable" if stored.live else "Empty"
            protocol_type = stored.protocol_type
        if (states and state.lower() not in states) or (types and "classic" not in types):
            continue
        out.append({"group_id": group_id, "protocol_type": protocol_type, "group_state": state,
                    "group_type": "classic"})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": out}


async def describe_groups(conn: KafkaConnection, req: Request) -> dict:
    out = []
    for group_id in req.body.get("groups") or []:
        dead = {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": "Dead",
                "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": -2147483648}
        try:
            g = await _group(conn, group_id, create=False)
        except NotCoordinator as nc:
            out.append({**dead, "error_code": nc.code})
            continue
        if g is None:
            if req.api_version >= 6:
                dead.update(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=f"group {group_id} not found")
            out.append(dead)
            continue
        out.append({**g.describe(), "error_message": None})
    return {"throttle_time_ms": 0, "groups": out}


async def delete_groups(conn: KafkaConnection, req: Request) -> dict:
    coordinator = conn.front.groups
    results = []
    for group_id in req.body.get("groups_names") or []:
        try:
            g = await _group(conn, group_id, create=False)
        except NotCoordinator as nc:
            results.append({"group_id": group_id, "error_code": nc.code})
            continue
        if g is None:
            results.append({"group_id": group_id, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND)})
            continue
        if g.members or g.state not in (State.EMPTY,):
            results.append({"group_id": group_id, "error_code": int(ErrorCode.NON_EMPTY_GROUP)})
            continue
        items = [Item(parse_topic(p)) for p in g.partitions]
        await coordinator.offsets.run("forget", group_id, items)
        failed = [i for i in items if i.error != ErrorCode.NONE]
        if failed:
            g.partitions = [str(i.name) for i in failed]
            g.dirty = True
            coordinator.changed(g)
            results.append({"group_id": group_id, "error_code": int(failed[0].error)})
            continue
        await coordinator.delete(g)
        log.info("kafka group %s: deleted with its subscriptions on %d partitions", group_id, len(items))
        results.append({"group_id": group_id, "error_code": 0})
    return {"throttle_time_ms": 0, "results": results}


async def offset_delete(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    group_id = body.get("group_id") or ""
    topics = [(t.get("name") or "", list(t.get("partitions") or [])) for t in body.get("topics") or []]
    coordinator = conn.front.groups
    try:
        g = await _group(conn, group_id, create=False)
    except NotCoordinator as nc:
        return {"error_code": nc.code, "throttle_time_ms": 0, "topics": []}
    if g is None:
        return {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND), "throttle_time_ms": 0, "topics": []}
    subscribed = _subscribed_topics(g)
    rows = await _items(conn, topics)
    todo = []
    for name, p, item in rows:
        if item is None:
            continue
        if g.state is not State.EMPTY and name in subscribed:
            p["error_code"] = int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            continue
        todo.append(item)
    await coordinator.offsets.run("forget", group_id, todo)
    gone = {str(i.name) for i in todo if i.error == ErrorCode.NONE}
    if gone:
        g.partitions = [p for p in g.partitions if p not in gone]
        g.dirty = True
        await coordinator.flush(g)
    answers = []
    for name, p, item in rows:
        err = p.get("error_code", 0) if item is None or "error_code" in p else int(item.error)
        answers.append((name, {"partition_index": int(p.get("partition_index", 0)), "error_code": int(err)}))
    return {"error_code": 0, "throttle_time_ms": 0, "topics": _by_topic(answers)}


def _subscribed_topics(g: Group) -> set[str]:
    """Topics the members subscribe to (from the consumer protocol's subscription: int16 version,
    then an array of topic names); unreadable metadata subscribes to nothing."""
    out: set[str] = set()
    for m in g.members.values():
        data = m.metadata_for(g.protocol)
        try:
            (count,) = struct.unpack_from(">i", data, 2)
            pos = 6
            for _ in range(max(count, 0)):
                (size,) = struct.unpack_from(">h", data, pos)
                out.add(data[pos + 2:pos + 2 + size].decode())
                pos += 2 + size
        except (struct.error, UnicodeDecodeError):
            continue
    return out
