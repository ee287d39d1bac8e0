"""Browsing a topic's messages for the web console: filters and schema decoding on the broker.

`GET /admin/v2/persistent/{tenant}/{ns}/{topic}/messages` → 200
`{"topic", "messages": [...], "scannedEntries", "stoppedBy": "limit"|"scanBound"|"end", "next"}`.
Where the scan starts (at most one of these; 400 otherwise):
- `from=latest` (the default): the newest message first, walking back;
- `from=earliest`: the oldest kept message first;
- `publishTime=<ms>`: the first entry published at or after it, ascending
  (`ManagedLedger.position_for_publish_time`, the index resetcursor-by-time uses);
- `messageId=<ledger:entry[:batchIndex]>`: that message first, ascending, included;
- `before=<ledger:entry[:batchIndex]>`: the message just older than that one first, walking back
  (how a newest-first page goes on: the `next` of a newest-first answer).
`limit` (1..500, 50) messages answered; `maxScanEntries` (1..`console_scan_entries_max`, 10000)
entries read at most, and at most SCAN_TIME_MAX_S spent, both answered as `stoppedBy: scanBound`;
`payloadBytesMax` (65536; 0: the whole payload, up to `broker_max_message_bytes`) bytes shown per
payload. Filters: `key` (exact), `property` (`name=value`, or `name` present), `contains`
(case-insensitive, in the decoded payload's text). `next` is null at the end; ascending, pass it
as `messageId`, newest first, as `before`.

Each message (`Row.to_json`): `messageId` "ledger:entry:batchIndex" (-1 when not batched),
`ledgerId`, `entryId`, `batchIndex`, `key`, `properties`, `publishTime`, `eventTime`,
`producerName`, `sequenceId`, `schemaVersion`, `size` (payload bytes, uncompressed) and
`payload` (`broker.schemas.decode.Shown`), decoded by the topic's schema at the message's
version (else the latest). A chunk of a chunked message is shown as it is stored, with `chunk`
`{"uuid", "id", "total"}` (the browse does not join chunks). An entry that does not parse or
decompress is one message with its raw bytes and `error`.

Entries are read through the managed ledger, so offloaded ledgers are served; each read is at
most READ_ENTRIES_MAX entries and READ_BYTES_MAX bytes (a larger entry alone) and waits at most
ENTRY_READ_TIMEOUT_S. Served on the topic's owner (`lookup.owner_redirect`); a partitioned
topic's parent is 405 naming a partition; an unknown topic 404. `broker.admin.tail` shares the
rows, filters and schemas.

What must hold: nothing is read or changed before every parameter is checked; an answer holds
at most `limit` messages; no payload is shown past `payloadBytesMax`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import Refused, topic_of
from broker.records import policies
from broker.schemas.decode import Shown, raw, render
from broker.schemas.registry import SchemaRegistry
from common.errors import BadRequestBody, MalformedPayload, NotFound, ServiceNotReady
from common.schema_records import SchemaData, version_of_bytes
from common.topic_names import TopicName
from entries.batch import BatchMessage, decode_payload
from entries.entry import parse_entry
from ledger.position import Position

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic
    from ledger.managed_ledger import ManagedLedger

ROUTE = lookup.TOPIC_ROUTE + "/messages"
LIMIT_DEFAULT, LIMIT_MAX = 50, 500
SCAN_ENTRIES_DEFAULT = 10_000
PAYLOAD_BYTES_DEFAULT = 65_536
READ_ENTRIES_MAX = 100               # entries one read asks for
READ_BYTES_MAX = 8 * 1024 * 1024     # bytes one read holds (a larger entry is read alone)
ENTRY_READ_TIMEOUT_S = 30.0          # one read (the cold tier too)
SCAN_TIME_MAX_S = 30.0               # one answer's scan; then it stops as at the scan bound
I64_MAX = 2**63 - 1


# --- parameters ---------------------------------------------------------------------------------------

def int_param(query: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """An integer query parameter within [lo, hi]; BadRequestBody (400) otherwise."""
    text = query.get(name)
    if text is None:
        return default
    value = text.strip()
    if not (value.isascii() and value.lstrip("-").isdigit()):
        raise BadRequestBody(f"{name} must be an integer, not {text!r}")
    number = int(value)
    if not lo <= number <= hi:
        raise BadRequestBody(f"{name} must be between {lo} and {hi}, not {number}")
    return number


def message_id_param(text: str, name: str) -> tuple[Position, int]:
    """(position, batch index or -1) of `ledger:entry[:batchIndex]`; BadRequestBody (400) otherwise."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3) or not all(p.isascii() and p.lstrip("-").isdigit() for p in parts):
        raise BadRequestBody(f"{name} must be ledger:entry or ledger:entry:batchIndex, not {text!r}")
    numbers = [int(p) for p in parts]
    batch_index = numbers[2] if len(numbers) == 3 else -1
    if not (0 <= numbers[0] <= I64_MAX and 0 <= numbers[1] <= I64_MAX and -1 <= batch_index <= I64_MAX):
        raise BadRequestBody(f"{name} {text!r} is out of range")
    return Position(numbers[0], numbers[1]), batch_index


def payload_bytes_param(query: Mapping[str, str], default: int, cap: int) -> int:
    """`payloadBytesMax`: 0 means the whole payload, which is at most `cap` (the largest message)."""
    asked = int_param(query, "payloadBytesMax", default, 0, I64_MAX)
    return cap if asked == 0 else min(asked, cap)


@dataclass(frozen=True)
class Filters:
    """What a message must have to be shown; None: no condition."""

    key: str | None = None
    property_name: str | None = None
    property_value: str | None = None     # None: the property needs only to be present
    contains: str | None = None           # lower case

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Filters:
        prop = query.get("property")
        name, value = (None, None) if prop is None else _property_condition(prop)
        contains = query.get("contains")
        if contains is not None and not contains:
            raise BadRequestBody("contains must not be empty")
        return cls(query.get("key"), name, value, None if contains is None else contains.lower())

    def matches(self, row: Row, schemas: TopicSchemas) -> bool:
        if self.key is not None and row.key != self.key:
            return False
        if self.property_name is not None:
            found = row.properties.get(self.property_name)
            if found is None or (self.property_value is not None and found != self.property_value):
                return False
        if self.contains is not None:
            return self.contains in row.shown(schemas, None).searchable().lower()
        return True


def _property_condition(text: str) -> tuple[str, str | None]:
    name, sep, value = text.partition("=")
    if not name:
        raise BadRequestBody(f"property must be name=value or name, not {text!r}")
    return name, value if sep else None


@dataclass(frozen=True)
class Start:
    """Where a scan starts and which way it walks."""

    position: Position | None       # None: the end the direction starts from
    batch_index: int = -1           # ascending: members before it skipped; descending: members from it
    descending: bool = False
    exclusive: bool = False         # descending from `before`: that message itself is not shown
    publish_time_ms: int | None = None   # ascending from the first entry published at or after it


def start_param(query: Mapping[str, str]) -> Start:
    given = [name for name in ("from", "publishTime", "messageId", "before") if name in query]
    if len(given) > 1:
        raise BadRequestBody(f"give at most one of from, publishTime, messageId, before; not {', '.join(given)}")
    if "publishTime" in query:
        return Start(None, publish_time_ms=int_param(query, "publishTime", 0, 0, I64_MAX))
    for name, descending in (("messageId", False), ("before", True)):
        if name in query:
            position, batch_index = message_id_param(query[name], name)
            return Start(position, batch_index, descending, exclusive=descending)
    where = query.get("from", "latest")
    if where not in ("latest", "earliest"):
        raise BadRequestBody(f"from must be latest or earliest, not {where!r}")
    return Start(None, -1, where == "latest")


@dataclass(frozen=True)
class Browse:
    """A checked `/messages` request."""

    start: Start
    limit: int
    scan_entries_max: int
    payload_bytes_max: int
    filters: Filters


def browse_params(query: Mapping[str, str], scan_entries_cap: int, payload_cap: int) -> Browse:
    return Browse(start_param(query), int_param(query, "limit", LIMIT_DEFAULT, 1, LIMIT_MAX),
                  int_param(query, "maxScanEntries", min(SCAN_ENTRIES_DEFAULT, scan_entries_cap), 1,
                            scan_entries_cap),
                  payload_bytes_param(query, PAYLOAD_BYTES_DEFAULT, payload_cap), Filters.from_query(query))


# --- schemas and rows -----------------------------------------------------------------------------

@dataclass
class TopicSchemas:
    """A topic's schema versions, read once per request (or tail)."""

    versions: dict[int, SchemaData] = field(default_factory=dict)    # stored, not deleted
    latest: SchemaData | None = None                                   # the latest live one; None: no schema

    @classmethod
    async def load(cls, service: BrokerService, name: TopicName) -> TopicSchemas:
        registry = SchemaRegistry(service.astore, service.clock)
        stored = await registry.versions(name)
        live = await registry.get(name)
        return cls({s.version: s.schema for s in stored if not s.deleted}, None if live is None else live.schema)

    def of(self, version: int | None) -> SchemaData | None:
        found = None if version is None else self.versions.get(version)
        return found if found is not None else self.latest


@dataclass
class Row:
    """One message of an entry, before rendering."""

    position: Position
    batch_index: int                 # -1: not batched
    payload: bytes                   # uncompressed
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    publish_time_ms: int = 0
    event_time_ms: int | None = None
    producer_name: str = ""
    sequence_id: int = 0
    schema_version: int | None = None
    chunk: dict[str, Any] | None = None     # a chunk of a chunked message: shown as stored
    error: str | None = None                # the entry did not parse or decompress: raw bytes

    @property
    def message_id(self) -> str:
        return f"{self.position.ledger_id}:{self.position.entry_id}:{self.batch_index}"

    def shown(self, schemas: TopicSchemas, bytes_max: int | None) -> Shown:
        if self.error is not None or self.chunk is not None:
            cut = bytes_max is not None and len(self.payload) > bytes_max
            return raw(self.payload[:bytes_max] if cut else self.payload, truncated=cut, error=self.error)
        return render(self.payload, schemas.of(self.schema_version), bytes_max=bytes_max)

    def to_json(self, schemas: TopicSchemas, bytes_max: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "messageId": self.message_id, "ledgerId": self.position.ledger_id, "entryId": self.position.entry_id,
            "batchIndex": self.batch_index, "key": self.key, "properties": self.properties,
            "publishTime": self.publish_time_ms, "eventTime": self.event_time_ms,
            "producerName": self.producer_name, "sequenceId": self.sequence_id,
            "schemaVersion": self.schema_version, "size": len(self.payload),
            "payload": self.shown(schemas, bytes_max).to_json()}
        if self.chunk is not None:
            out["chunk"] = self.chunk
        return out


def entry_rows(position: Position, data: bytes) -> list[Row]:
    """The messages of a stored entry, in batch order (a non-batched entry: one, batchIndex -1);
    none for a marker (transactions, replication)."""
    try:
        info = parse_entry(data)
        md = info.metadata
        if md.HasField("marker_type"):
            return []
        members = decode_payload(md, info.payload(data))
    except MalformedPayload as exc:
        return [Row(position, -1, bytes(data), error=f"the entry does not parse: {exc}")]
    version = version_of_bytes(md.schema_version) if md.HasField("schema_version") else None
    batched = md.HasField("num_messages_in_batch")
    rows = [_row(position, i if batched else -1, m, md.sequence_id + i) for i, m in enumerate(members)]
    for row in rows:
        row.publish_time_ms, row.producer_name, row.schema_version = md.publish_time, md.producer_name, version
    if md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1:
        rows[0].chunk = {"uuid": md.uuid, "id": md.chunk_id, "total": md.num_chunks_from_msg}
    return rows


def _row(position: Position, batch_index: int, m: BatchMessage, sequence_id: int) -> Row:
    event_time = m.event_time_ms if m.event_time_ms else None     # 0: not set, as Pulsar's clients read it
    return Row(position, batch_index, m.payload, m.partition_key, dict(m.properties),
               event_time_ms=event_time, sequence_id=m.sequence_id if m.sequence_id is not None else sequence_id)


# --- the topic, here ------------------------------------------------------------------------------

async def topic_here(service: BrokerService, request: web.Request, what: str) -> PersistentTopic:
    """The request's topic, loaded on this broker (the owner redirect sent the call here): 405
    for a partitioned topic's parent (naming a partition), NotFound (404) for an unknown one."""
    name = topic_of(request)
    if name.partition_index < 0 and await service.partitions(name) > 0:
        raise Refused(405, f"{what} on a partitioned topic is not allowed: ask one partition, such as "
                           f"{name.partition(0)}")
    loaded = service.topics.get(str(name))
    if loaded is not None:
        return loaded
    known = {str(n) for n in await policies.topics_of_namespace(service.astore, name.tenant, name.namespace)}
    if str(name) not in known and not await lookup.is_partition_of_existing(service, name):
        raise NotFound(f"Topic {name} not found")
    return await service.get_topic(name)


async def read_entries(ml: ManagedLedger, start: Position, count: int) -> list[tuple[Position, bytes]]:
    """At most `count` entries at/after `start` (bounded in bytes and time); [] at the end."""
    try:
        entries = await asyncio.wait_for(ml.read(start, count, max_bytes=READ_BYTES_MAX), ENTRY_READ_TIMEOUT_S)
    except TimeoutError:
        raise ServiceNotReady(f"reading entries at {start} took over {ENTRY_READ_TIMEOUT_S:.0f} s") from None
    await asyncio.sleep(0)       # reads served from the cache: a long scan still lets others run
    return [(e.position, e.data) for e in entries]


# --- walking the ledger -------------------------------------------------------------------------------

async def _ascending(ml: ManagedLedger, start: Position) -> AsyncIterator[tuple[Position, bytes]]:
    position = start
    while True:
        got = await read_entries(ml, position, READ_ENTRIES_MAX)
        if not got:
            return
        for item in got:
            yield item
        position = ml.next_position(got[-1][0])




def _window_start(ml: ManagedLedger, ledger_id: int, lo: int, hi: int) -> int:
    """The first entry of the window ending at `hi` (inclusive): at most READ_ENTRIES_MAX entries
    and READ_BYTES_MAX bytes, at least one."""
    start, total = hi, ml.entry_meta(Position(ledger_id, hi)).size_bytes
    while start > lo and hi - start + 1 < READ_ENTRIES_MAX:
        size = ml.entry_meta(Position(ledger_id, start - 1)).size_bytes
        if total + size > READ_BYTES_MAX:
            break
        start, total = start - 1, total + size
    return start


async def _descending(ml: ManagedLedger, start: Position) -> AsyncIterator[tuple[Position, bytes]]:
    for ledger_id, lo, end in reversed(ml.kept_spans()):
        if ledger_id > start.ledger_id:
            continue
        hi = min(end - 1, start.entry_id) if ledger_id == start.ledger_id else end - 1
        while hi >= lo:
            first = _window_start(ml, ledger_id, lo, hi)
            got = await read_entries(ml, Position(ledger_id, first), hi - first + 1)
            for item in reversed([g for g in got if g[0] <= Position(ledger_id, hi)]):
                yield item
            hi = first - 1


# --- the scan ---------------------------------------------------------------------------------------

@dataclass
class ScanResult:
    rows: list[Row] = field(default_factory=list)
    scanned_entries: int = 0
    stopped_by: str = "end"
    next: str | None = None


def _first_position(ml: ManagedLedger, start: Start) -> Position:
    if start.publish_time_ms is not None:
        return ml.position_for_publish_time(start.publish_time_ms)
    if start.position is None:
        return ml.last_confirmed if start.descending else ml.first_position
    if start.descending and start.exclusive and start.batch_index < 0:
        return Position(start.position.ledger_id, start.position.entry_id - 1)   # strictly before that entry
    return start.position


def _members(rows: list[Row], position: Position, start: Start, first: Position) -> list[Row]:
    """The entry's rows in scan order, those before the start message left out."""
    if position != first or start.position is None or start.batch_index < 0:
        return rows[::-1] if start.descending else rows
    if not start.descending:
        return [r for r in rows if r.batch_index < 0 or r.batch_index >= start.batch_index]
    return [r for r in rows[::-1] if 0 <= r.batch_index < start.batch_index]     # before it, exclusive
    return rows


def _continue_from(ml: ManagedLedger, row: Row, rows: list[Row], descending: bool) -> str:
    """`next` after stopping at `row`, the last shown of `rows` (the entry's, in scan order)."""
    if descending:
        return row.message_id if row.batch_index >= 0 else str(row.position)
    after = rows.index(row) + 1
    if after < len(rows):
        return rows[after].message_id
    return str(ml.next_position(row.position))


async def scan(ml: ManagedLedger, browse: Browse, schemas: TopicSchemas,
               clock: Callable[[], float] = time.monotonic) -> ScanResult:
    """The messages `browse` asks for, and why the scan stopped."""
    first = _first_position(ml, browse.start)
    descending = browse.start.descending
    walk = _descending(ml, first) if descending else _ascending(ml, first)
    result, deadline = ScanResult(), clock() + SCAN_TIME_MAX_S
    last = first
    async for position, data in walk:
        result.scanned_entries += 1
        last = position
        rows = _members(entry_rows(position, data), position, browse.start, first)
        for row in rows:
            if browse.filters.matches(row, schemas):
                result.rows.append(row)
                if len(result.rows) >= browse.limit:
                    result.stopped_by, result.next = "limit", _continue_from(ml, row, rows, descending)
                    return result
        if result.scanned_entries >= browse.scan_entries_max or clock() > deadline:
            if (last <= ml.first_position) if descending else (last >= ml.last_confirmed):
                return result       # the bound and the end at the same entry: nothing is left unread
            result.stopped_by = "scanBound"
            result.next = str(last) if descending else str(ml.next_position(last))
            return result
    return result


# --- the route ------------------------------------------------------------------------------------

def register(app: web.Application, service: BrokerService) -> None:
    app.router.add_get(ROUTE, _MessageRoutes(service).browse)


class _MessageRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def browse(self, request: web.Request) -> web.Response:
        config = self.service.config
        browse = browse_params(request.query, config.console_scan_entries_max, config.broker_max_message_bytes)
        topic = await topic_here(self.service, request, "Browsing messages")
        schemas = await TopicSchemas.load(self.service, topic.name)
        result = await scan(topic.ml, browse, schemas)
        return web.json_response({
            "topic": str(topic.name),
            "messages": [r.to_json(schemas, browse.payload_bytes_max) for r in result.rows],
            "scannedEntries": result.scanned_entries, "stoppedBy": result.stopped_by, "next": result.next})
