"""Subscription routes of the admin API: Pulsar's paths, bodies, headers and status codes.

Under `/admin/v2/persistent/{t}/{ns}/{topic}`:
- `GET    .../subscriptions` → `["sub", ...]` (a partitioned topic: the names on any partition).
- `PUT    .../subscription/{sub}` body MessageIdImpl `{"ledgerId", "entryId", "partitionIndex"}`
  (absent: latest; `-1:-1` earliest, `2^63-1:2^63-1` latest, as Pulsar's clients encode them)
  → 204; 409 "Subscription already exists for topic"; 412 for a position past the end. The
  topic is created if need be, as Pulsar's auto-creation does.
- `DELETE .../subscription/{sub}[?force=true]` → 204; 412 "Subscription has active connected
  consumers" unless forced (forced: they are disconnected first); 404 unknown.
- `POST   .../subscription/{sub}/skip/{numMessages}` → 204: the next N unacked entries acked.
- `POST   .../subscription/{sub}/skip_all` → 204 (clear-backlog).
- `POST   .../subscription/{sub}/resetcursor/{timestampMs}` → 204: the next entry read is the
  first published at or after it (past the end: the end).
- `POST   .../subscription/{sub}/resetcursor` body ResetCursorData `{"ledgerId", "entryId",
  "partitionIndex", "batchIndex", "isExcluded"}` → 204; 412 "Unable to find position ..." past
  the end. Resets take the binary SEEK's path (`Subscription.seek`): connected consumers are
  disconnected, come back and get the messages again from the new position.
- `POST   .../subscription/{sub}/expireMessages/{expireTimeInSeconds}` → 204: every message
  published more than that long ago is acked (`ManagedCursor.expire_before`); with a body
  (ResetCursorData) instead: everything up to that id (before it with `isExcluded`).
- `POST   .../all_subscription/expireMessages/{expireTimeInSeconds}` → 204: every subscription.
- `GET    .../subscription/{sub}/position/{n}` (peek: the n-th unacked entry, 1-based),
  `GET .../examinemessage?initialPosition=earliest|latest&messagePosition=n` (the n-th entry from
  the first kept or from the last), `GET .../ledger/{l}/entry/{e}` → the entry's payload,
  decompressed (a batch: the whole batch payload), with Pulsar's `X-Pulsar-*` headers (one JSON
  `X-Pulsar-PROPERTY` header for the properties, as newer brokers send). Read through the
  managed ledger, so offloaded entries are served too. 404 "Message not found" past the end.

Partitioned topics (the owner redirect lets their calls through; `lookup.owner_redirect`):
create, unsubscribe, skip_all, resetcursor by time and expireMessages by time run on every
partition, each on its owner, as Pulsar's do (create: 409 only if every partition has it;
reset: 412 only if every partition refuses). Skip N, peek, examine, get-by-id, and reset or
expire at a message id are per partition: 405 with Pulsar's reason, naming a partition to use.

A Kafka consumer group's subscription (its cursor names the group: `broker.topics.group_offsets`)
is deleted, skipped or reset only while the group has no live members (412 otherwise, forced or
not), as Kafka's tools refuse to reset a group that is not empty; expiry acts on it as TTL does.

Bad input answers 400 with a reason (a count or time that is not an integer, n < 1, a malformed
message id) and changes nothing: everything is checked before the cursor moves. Cursor moves
are in memory and quick; the persist that follows is awaited at most CURSOR_FLUSH_TIMEOUT_S
(after that the periodic persist carries it) and entry reads at most ENTRY_READ_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import body_json, error, flag, reason_of, status_of, topic_of
from broker.cluster import peers
from broker.records import policies
from broker.topics import group_offsets
from broker.topics.rates import expire_counted
from common.errors import (
    AlreadyExists,
    BadRequestBody,
    NotAllowed,
    NotFound,
    ServiceNotReady,
    StrataError,
    SubscriptionNotFound,
)
from common.topic_names import TopicName
from entries.batch import decompress
from entries.entry import ENTRY_HEAD_BYTES, parse_entry
from ledger.position import EARLIEST, LATEST, Position
from proto import pulsar_api_pb2 as pb

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

CURSOR_FLUSH_TIMEOUT_S = 10.0   # persisting a moved cursor before answering
ENTRY_READ_TIMEOUT_S = 30.0     # reading one entry for peek / examine / get-by-id (cold tier too)
I64_MAX = 2**63 - 1

Local = Callable[[TopicName], Awaitable[object]]


def register(app: web.Application, service: BrokerService) -> None:
    r = _SubscriptionRoutes(service)
    topic = lookup.TOPIC_ROUTE
    sub = topic + "/subscription/{sub}"
    app.router.add_get(topic + "/subscriptions", r.list_subscriptions)
    app.router.add_put(sub, r.create)
    app.router.add_delete(sub, r.delete)
    app.router.add_post(sub + "/skip_all", r.clear_backlog)
    app.router.add_post(sub + "/skip/{count}", r.skip)
    app.router.add_post(sub + "/resetcursor/{timestamp}", r.reset_to_time)
    app.router.add_post(sub + "/resetcursor", r.reset_to_position)
    app.router.add_post(sub + "/expireMessages/{seconds}", r.expire)
    app.router.add_post(sub + "/expireMessages", r.expire_to_position)
    app.router.add_post(topic + "/all_subscription/expireMessages/{seconds}", r.expire_all)
    app.router.add_get(sub + "/position/{count}", r.peek)
    app.router.add_get(topic + "/examinemessage", r.examine)
    app.router.add_get(topic + "/ledger/{ledger}/entry/{entry}", r.get_by_id)


# --- reading requests ---------------------------------------------------------------------------

def _integer(text: str, what: str, minimum: int) -> int:
    """A decimal integer path or query value >= minimum; BadRequestBody (400) otherwise."""
    value = text.strip()
    if not (value.isascii() and value.lstrip("-").isdigit()):   # "²".isdigit() holds too
        raise BadRequestBody(f"{what} must be an integer, not {text!r}")
    number = int(value)
    if number < minimum or number > I64_MAX:
        raise BadRequestBody(f"{what} must be between {minimum} and {I64_MAX}, not {number}")
    return number


def _sub_name(request: web.Request) -> str:
    name = request.match_info["sub"]
    if not name.strip():
        raise BadRequestBody("subscription name must not be empty")
    return name


def _int_field(body: dict, name: str, default: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequestBody(f"message id field {name} must be an integer, not {value!r}")
    return value


def _excluded(body: dict) -> bool:
    for name in ("isExcluded", "excluded"):    # Jackson writes Lombok's `isExcluded` as "excluded"
        value = body.get(name)
        if value is not None:
            if not isinstance(value, bool):
                raise BadRequestBody(f"message id field {name} must be true or false, not {value!r}")
            return value
    return False


def message_id(body: object, *, default: Position | None = None) -> tuple[Position, int, bool]:
    """(position, batchIndex, isExcluded) of a MessageIdImpl / ResetCursorData body; `-1:-1` is
    EARLIEST and `2^63-1:2^63-1` LATEST (how Pulsar's clients send them). An empty body gives
    `default` if there is one. BadRequestBody (400) for anything else."""
    if body is None and default is not None:
        return default, -1, False
    if not isinstance(body, dict):
        raise BadRequestBody('message id body must be an object like {"ledgerId": 1, "entryId": 2}')
    ledger_id, entry_id = _int_field(body, "ledgerId", None), _int_field(body, "entryId", None)
    if ledger_id is None or entry_id is None:
        raise BadRequestBody("message id body needs ledgerId and entryId")
    batch_index = _int_field(body, "batchIndex", -1)
    excluded = _excluded(body)
    if ledger_id == -1 and entry_id == -1:
        return EARLIEST, -1, excluded
    if ledger_id >= I64_MAX and entry_id >= I64_MAX:
        return LATEST, -1, excluded
    if not (0 <= ledger_id < I64_MAX and 0 <= entry_id < I64_MAX):
        raise BadRequestBody(f"Invalid message ID: {ledger_id}:{entry_id}")
    return Position(ledger_id, entry_id), -1 if batch_index is None else batch_index, excluded


def _partitioned_refusal(what: str, name: TopicName) -> web.Response:
    """Pulsar's 405 for a per-partition operation asked of a partitioned topic."""
    return error(405, f"{what} on a partitioned topic is not allowed: ask one partition, such as "
                      f"{name.partition(0)}")


# --- answering an entry -----------------------------------------------------------------------------

def pulsar_date(ms: int) -> str:
    """Pulsar's DateFormatter (ISO offset date-time, UTC): 2021-01-22T13:12:14.868Z."""
    try:
        moment = datetime.fromtimestamp(ms // 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    fraction = f".{ms % 1000:03d}".rstrip("0").rstrip(".")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _text(value: str) -> str:
    """A header value: control characters escaped (a header cannot carry a line break)."""
    if value.isprintable():
        return value
    return json.dumps(value)[1:-1]


def entry_headers(position: Position, data: bytes) -> dict[str, str]:
    """Pulsar's `X-Pulsar-*` headers of a stored entry (PersistentTopicsBase.generateResponseWithEntry)."""
    info = parse_entry(data)
    md = info.metadata
    h = {"X-Pulsar-Message-ID": str(position)}
    if md.properties:
        h["X-Pulsar-PROPERTY"] = json.dumps({kv.key: kv.value for kv in md.properties})
    h["X-Pulsar-publish-time"] = pulsar_date(md.publish_time)
    for field, header in (("event_time", "event-time"), ("deliver_at_time", "deliver-at-time")):
        if md.HasField(field):
            h[f"X-Pulsar-{header}"] = pulsar_date(getattr(md, field))
    if md.HasField("num_messages_in_batch"):
        h["X-Pulsar-num-batch-message"] = str(md.num_messages_in_batch)
        h["X-Pulsar-batch-size"] = str(len(data) - (info.payload_offset - ENTRY_HEAD_BYTES))
    if md.HasField("null_value"):
        h["X-Pulsar-null-value"] = _bool(md.null_value)
    if md.HasField("num_chunks_from_msg"):
        h["X-Pulsar-PROPERTY-TOTAL-CHUNKS"] = str(md.num_chunks_from_msg)
        h["X-Pulsar-PROPERTY-CHUNK-ID"] = str(md.chunk_id)
    h["X-Pulsar-Is-Encrypted"] = _bool(len(md.encryption_keys) > 0)
    h["X-Pulsar-producer-name"] = _text(md.producer_name)
    h["X-Pulsar-sequence-id"] = str(md.sequence_id)
    _optional_headers(md, h)
    return h


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_headers(md: pb.MessageMetadata, h: dict[str, str]) -> None:
    if md.HasField("replicated_from"):
        h["X-Pulsar-replicated-from"] = _text(md.replicated_from)
    if md.HasField("partition_key"):
        h["X-Pulsar-partition-key"] = _text(md.partition_key)
    if md.HasField("compression"):
        h["X-Pulsar-compression"] = pb.CompressionType.Name(md.compression)
    if md.HasField("uncompressed_size"):
        h["X-Pulsar-uncompressed-size"] = str(md.uncompressed_size)
    if md.HasField("encryption_algo"):
        h["X-Pulsar-encryption-algo"] = _text(md.encryption_algo)
    if md.HasField("schema_version"):
        h["X-Pulsar-Base64-schema-version"] = base64.b64encode(md.schema_version).decode()
    if md.HasField("partition_key_b64_encoded"):
        h["X-Pulsar-partition-key-b64-encoded"] = _bool(md.partition_key_b64_encoded)
    if md.HasField("ordering_key"):
        h["X-Pulsar-Base64-ordering-key"] = base64.b64encode(md.ordering_key).decode()
    for field, header in (("marker_type", "marker-type"), ("txnid_least_bits", "txnid-least-bits"),
                          ("txnid_most_bits", "txnid-most-bits"),
                          ("highest_sequence_id", "highest-sequence-id"), ("uuid", "uuid"),
                          ("num_chunks_from_msg", "num-chunks-from-msg"),
                          ("total_chunk_msg_size", "total-chunk-msg-size"), ("chunk_id", "chunk-id")):
        if md.HasField(field):
            h[f"X-Pulsar-{header}"] = _text(str(getattr(md, field)))
    if md.HasField("null_partition_key"):
        h["X-Pulsar-null-partition-key"] = _bool(md.null_partition_key)


def entry_response(position: Position, data: bytes) -> web.Response:
    """The entry's payload, decompressed, with its headers."""
    headers = entry_headers(position, data)
    info = parse_entry(data)
    md = info.metadata
    payload = decompress(info.payload(data), md.compression, md.uncompressed_size)
    return web.Response(body=payload, headers=headers, content_type="application/octet-stream")


# --- the routes -------------------------------------------------------------------------------------

class _PartitionFailure(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _SubscriptionRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    # --- helpers ------------------------------------------------------------------------------

    async def _partitions(self, name: TopicName) -> int:
        return await self.service.partitions(name) if name.partition_index < 0 else 0

    async def _topic(self, name: TopicName, *, create: bool = False) -> PersistentTopic:
        """The topic, loaded here (the redirect sent the call to its owner); NotFound (404) if it
        does not exist, unless `create`."""
        loaded = self.service.topics.get(str(name))
        if loaded is not None:
            return loaded
        if not create:
            known = {str(n) for n in await policies.topics_of_namespace(
                self.service.astore, name.tenant, name.namespace)}
            if str(name) not in known and not await lookup.is_partition_of_existing(self.service, name):
                raise NotFound(f"Topic {name} not found")
        return await self.service.get_topic(name)

    @staticmethod
    def _sub(topic: PersistentTopic, sub_name: str) -> Subscription:
        sub = topic.subscriptions.get(sub_name)
        if sub is None or sub.closed:
            raise SubscriptionNotFound(f"Subscription {sub_name} not found for topic {topic.name}")
        return sub

    async def _movable(self, topic: PersistentTopic, sub_name: str) -> Subscription:
        """The subscription, for an admin move or delete: NotAllowed (412) while it is a live
        Kafka group's (`group_offsets.check_admin_move`)."""
        sub = self._sub(topic, sub_name)
        await group_offsets.check_admin_move(self.service.astore, sub)
        return sub

    @staticmethod
    async def _persist(sub: Subscription) -> None:
        """Persist the moved cursor before answering, at most CURSOR_FLUSH_TIMEOUT_S (after that
        the periodic persist carries the change, which is applied already)."""
        if not sub.durable:
            return
        try:
            await asyncio.wait_for(sub.cursor.flush(), CURSOR_FLUSH_TIMEOUT_S)
        except (TimeoutError, StrataError) as exc:
            log.warning("persisting subscription %s of %s after an admin move: %r", sub.name,
                        sub.topic.name, exc)

    async def _on_each_partition(self, name: TopicName, count: int, method: str, suffix: str,
                                 local: Local, body: object = None,
                                 query: dict[str, str] | None = None) -> list[tuple[int, object]]:
        """Run one operation on every partition, each on the broker that serves it: (status,
        answer, or the reason for an error status) per partition in order; status 0 when its
        owner could not be reached."""
        async def one(partition: TopicName) -> tuple[int, object]:
            try:
                url = await peers.owner_elsewhere(self.service, partition, assign=True)
                if url is None:
                    return 200, await local(partition)
            except StrataError as exc:
                return status_of(exc), reason_of(exc)
            status, answer = await peers.peer_call(url, method, f"/admin/v2/persistent/{partition.path}{suffix}",
                                                    query, body)
            if 200 <= status < 300:
                return status, answer
            marker = f"HTTP {status}: "       # peer_call's "<url>: HTTP <status>: <reason>"
            text = str(answer)
            return status, text.split(marker, 1)[1] if marker in text else text
        return list(await asyncio.gather(*(one(name.partition(i)) for i in range(count))))

    async def _run(self, request: web.Request, suffix: str, local: Local, *, tolerated: int | None = None,
                   body: object = None, query: dict[str, str] | None = None) -> web.Response:
        """`local` on this topic, or on every partition of a partitioned one. A partition's failure
        is the answer (its reason prefixed with the partition), except failures with status
        `tolerated`, which count only when every partition has one (Pulsar's rule for create:
        409, and reset: 412); then the first partition's reason is the answer as it is."""
        name = topic_of(request)
        count = await self._partitions(name)
        if count == 0:
            result = await local(name)
            return web.Response(status=204) if result is None else web.json_response(result)
        results = await self._on_each_partition(name, count, request.method, suffix, local, body, query)
        failures = [(i, s, r) for i, (s, r) in enumerate(results) if not 200 <= s < 300]
        serious = [(i, s, r) for i, s, r in failures if s != tolerated]
        if serious:
            index, status, reason = serious[0]
            return error(status or 503, f"{name.partition(index)}: {reason}")
        if failures and len(failures) == count:
            return error(failures[0][1], str(failures[0][2]))
        return web.Response(status=204)

    # --- list, create, delete ---------------------------------------------------------------------

    async def list_subscriptions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = await self._partitions(name)
        if count == 0:
            topic = await self._topic(name)
            return web.json_response(sorted(n for n, s in topic.subscriptions.items() if not s.closed))

        async def local(partition: TopicName) -> object:
            return sorted((await self._topic(partition, create=True)).subscriptions)
        results = await self._on_each_partition(name, count, "GET", "/subscriptions", local)
        names: set[str] = set()
        for index, (status, answer) in enumerate(results):
            if status != 200 or not isinstance(answer, list):
                return error(status or 503, f"{name.partition(index)}: {answer}")
            names.update(str(n) for n in answer)
        return web.json_response(sorted(names))

    async def create(self, request: web.Request) -> web.Response:
        sub_name = _sub_name(request)
        body = await body_json(request)
        position, _batch, _excluded = message_id(body, default=LATEST)

        async def local(name: TopicName) -> None:
            topic = await self._topic(name, create=True)
            if sub_name in topic.subscriptions:
                raise AlreadyExists("Subscription already exists for topic")
            _check_within(topic, position)
            sub = await topic.subscription(sub_name, durable=True, start=position)
            await self._persist(sub)
        return await self._run(request, f"/subscription/{_quoted(sub_name)}", local, tolerated=409, body=body)

    async def delete(self, request: web.Request) -> web.Response:
        sub_name = _sub_name(request)
        force = flag(request, "force")

        async def local(name: TopicName) -> None:
            topic = await self._topic(name)
            sub = await self._movable(topic, sub_name)
            if sub.consumers and not force:
                raise NotAllowed("Subscription has active connected consumers")
            sub.disconnect_all()
            await topic.unsubscribe(sub, None)
        return await self._run(request, f"/subscription/{_quoted(sub_name)}", local,
                               query={"force": "true" if force else "false"})

    # --- moving the cursor --------------------------------------------------------------------------

    async def skip(self, request: web.Request) -> web.Response:
        name, sub_name = topic_of(request), _sub_name(request)
        count = _integer(request.match_info["count"], "numMessages", 1)
        if await self._partitions(name):
            return _partitioned_refusal("Skip messages", name)
        sub = await self._movable(await self._topic(name), sub_name)
        sub.cursor.skip(count)
        sub.on_cursor_moved()
        await self._persist(sub)
        return web.Response(status=204)

    async def clear_backlog(self, request: web.Request) -> web.Response:
        sub_name = _sub_name(request)

        async def local(name: TopicName) -> None:
            sub = await self._movable(await self._topic(name), sub_name)
            sub.cursor.clear_backlog()
            sub.on_cursor_moved()
            await self._persist(sub)
        return await self._run(request, f"/subscription/{_quoted(sub_name)}/skip_all", local)

    async def reset_to_time(self, request: web.Request) -> web.Response:
        sub_name = _sub_name(request)
        timestamp_ms = _integer(request.match_info["timestamp"], "timestamp (ms)", 0)

        async def local(name: TopicName) -> None:
            sub = await self._movable(await self._topic(name), sub_name)
            sub.seek(None, timestamp_ms)      # the binary SEEK's path: consumers come back
            await self._persist(sub)
        return await self._run(request, f"/subscription/{_quoted(sub_name)}/resetcursor/{timestamp_ms}",
                               local, tolerated=412)

    async def reset_to_position(self, request: web.Request) -> web.Response:
        name, sub_name = topic_of(request), _sub_name(request)
        position, batch_index, excluded = message_id(await body_json(request))
        if await self._partitions(name):
            return error(405, "Reset-cursor at position is not allowed for partitioned-topic: "
                              f"ask one partition, such as {name.partition(0)}")
        topic = await self._topic(name)
        sub = await self._movable(topic, sub_name)
        _check_within(topic, position)
        if excluded and position not in (EARLIEST, LATEST):
            position = await _after_excluded(topic, position, batch_index)
        sub.seek(position, None)              # the binary SEEK's path: consumers come back
        await self._persist(sub)
        return web.Response(status=204)

    async def expire(self, request: web.Request) -> web.Response:
        sub_name = _sub_name(request)
        seconds = _integer(request.match_info["seconds"], "expireTimeInSeconds", 0)

        async def local(name: TopicName) -> None:
            await self._expire_sub(self._sub(await self._topic(name), sub_name), seconds)
        return await self._run(request, f"/subscription/{_quoted(sub_name)}/expireMessages/{seconds}", local)

    async def expire_all(self, request: web.Request) -> web.Response:
        seconds = _integer(request.match_info["seconds"], "expireTimeInSeconds", 0)

        async def local(name: TopicName) -> None:
            topic = await self._topic(name)
            for sub in [s for s in list(topic.subscriptions.values()) if not s.closed]:
                await self._expire_sub(sub, seconds)
        return await self._run(request, f"/all_subscription/expireMessages/{seconds}", local)

    async def _expire_sub(self, sub: Subscription, seconds: int) -> None:
        now_ms = self.service.clock.wall_ms()
        expire = functools.partial(sub.cursor.expire_before, now_ms - seconds * 1000)
        if expire_counted(sub, expire, now_ms):           # counted in totalMsgExpired, as Pulsar's
            sub.on_cursor_moved()
            await self._persist(sub)

    async def expire_to_position(self, request: web.Request) -> web.Response:
        name, sub_name = topic_of(request), _sub_name(request)
        position, _batch, excluded = message_id(await body_json(request))
        if await self._partitions(name):
            return error(405, "Expire message at position is not supported for partitioned-topic: "
                              f"ask one partition, such as {name.partition(0)}")
        topic = await self._topic(name)
        sub = self._sub(topic, sub_name)
        _check_within(topic, position)
        last = topic.ml.last_confirmed
        target = last if position == LATEST else min(position, last)
        upto = Position(target.ledger_id, target.entry_id - 1) if excluded and target == position else target
        if position != EARLIEST and upto > sub.cursor.mark_delete_position:
            sub.cursor.ack_cumulative(upto)
            sub.on_cursor_moved()
            await self._persist(sub)
        return web.Response(status=204)

    # --- reading entries ------------------------------------------------------------------------------

    async def peek(self, request: web.Request) -> web.Response:
        name, sub_name = topic_of(request), _sub_name(request)
        count = _integer(request.match_info["count"], "messagePosition", 1)
        if await self._partitions(name):
            return _partitioned_refusal("Peek messages", name)
        topic = await self._topic(name)
        position = self._sub(topic, sub_name).cursor.nth_unacked(count)
        if position is None:
            raise NotFound(f"Message not found: the subscription has fewer than {count} unacked messages")
        return entry_response(position, await _read_entry(topic, position))

    async def examine(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        initial = request.query.get("initialPosition", "latest")
        if initial not in ("earliest", "latest"):
            raise BadRequestBody(f"initialPosition must be earliest or latest, not {initial!r}")
        count = _integer(request.query.get("messagePosition", "1"), "messagePosition", 1)
        if await self._partitions(name):
            return _partitioned_refusal("Examine messages", name)
        topic = await self._topic(name)
        position = nth_entry(topic.ml, count, from_end=initial == "latest")
        if position is None:
            raise NotFound(f"Message not found: the topic keeps fewer than {count} messages")
        return entry_response(position, await _read_entry(topic, position))

    async def get_by_id(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        position = Position(_integer(request.match_info["ledger"], "ledgerId", 0),
                            _integer(request.match_info["entry"], "entryId", 0))
        if await self._partitions(name):
            return _partitioned_refusal("Get message by id", name)
        topic = await self._topic(name)
        return entry_response(position, await _read_entry(topic, position))


def _quoted(sub_name: str) -> str:
    return urllib.parse.quote(sub_name, safe="")


def _check_within(topic: PersistentTopic, position: Position) -> None:
    """NotAllowed (412, Pulsar's reason) for a position after the last stored entry."""
    last = topic.ml.last_confirmed
    if position not in (EARLIEST, LATEST) and position > topic.ml.next_position(last):
        raise NotAllowed(f"Unable to find position for position specified: {position} is after the "
                         f"last message {last}")


async def _after_excluded(topic: PersistentTopic, position: Position, batch_index: int) -> Position:
    """Where to read from when `position` itself is excluded: the next entry, unless members of a
    batch after `batch_index` remain (then the entry again: its later members are redelivered
    with it, the entry being the unit a cursor moves by)."""
    if batch_index >= 0:
        info = parse_entry(await _read_entry(topic, position))
        if info.is_batch and batch_index + 1 < info.num_messages:
            return position
    return topic.ml.next_position(position)


def nth_entry(ml, n: int, *, from_end: bool) -> Position | None:
    """The n-th (1-based) kept entry counted from the first, or from the last with `from_end`;
    None when fewer are kept (PersistentTopicsBase.internalExamineMessage)."""
    spans = [(ledger_id, start, end - start) for ledger_id, start, end in ml.kept_spans()]
    total = sum(count for _ledger, _start, count in spans)
    if n > total:
        return None
    left = total - n + 1 if from_end else n
    for ledger_id, start, count in spans:
        if left <= count:
            return Position(ledger_id, start + left - 1)
        left -= count
    return None


async def _read_entry(topic: PersistentTopic, position: Position) -> bytes:
    """One stored entry through the managed ledger (bookies or cold tier), at most
    ENTRY_READ_TIMEOUT_S; NotFound (404) if it is not kept."""
    ml = topic.ml
    if position > ml.last_confirmed or position < ml.first_position:
        raise NotFound(f"Message not found: no entry {position} (kept: {ml.first_position} to "
                       f"{ml.last_confirmed})")
    try:
        entries = await asyncio.wait_for(ml.read(position, 1), ENTRY_READ_TIMEOUT_S)
    except TimeoutError:
        raise ServiceNotReady(f"reading entry {position} took over {ENTRY_READ_TIMEOUT_S:.0f} s") from None
    if not entries or entries[0].position != position:
        raise NotFound(f"Message not found: no entry {position}")
    return entries[0].data
