"""Live tail of a topic for the web console, as Server-Sent Events.

`GET /admin/v2/persistent/{tenant}/{ns}/{topic}/tail` → 200 `text/event-stream`, from the end of
the topic as it was when the tail opened (only messages published after it):
- `event: open`, `data: {"topic": ..., "from": "ledger:entry"}` first, once the tail's start is
  fixed: a message published after the browser got it is in the tail;
- `event: message`, `data:` one message as `GET .../messages` shows it (`broker.admin.messages.Row`);
- `event: dropped`, `data: {"dropped": n, "reason": ...}`: the browser read slower than messages
  arrived, so the tail skipped ahead to the newest;
- `: ping` every PING_INTERVAL_S, so proxies and the browser keep the stream open;
- `event: end`, `data: {"reason": ...}`: the topic was deleted or unloaded, or the broker stops;
  then the stream ends.
Query: the `key`, `property` and `contains` filters and `payloadBytesMax` (default 4096) of
`.../messages`. Bad input 400, an unknown topic 404, a partitioned topic's parent 405 naming a
partition; over `console_tails_max` tails open on this broker: 503.

How it works: a reader task reads new entries through the managed ledger (at most
READ_ENTRIES_MAX and READ_BYTES_MAX per read; when there is nothing new it waits POLL_INTERVAL_S,
never spinning) and puts the events of matching messages on the tail's `Outbox`; the handler
writes them to the browser. The outbox holds at most `console_tail_queue_messages_max` messages
and PENDING_BYTES_MAX bytes: one more and everything waiting is dropped (counted), and the next
event the browser gets is `dropped`. The tail ends when the browser goes away (a failed write,
or its connection seen closing within CLOSED_CHECK_S), and then its reader is cancelled and its
slot given back.

What must hold: a tail never holds more than its bounds; every tail that took a slot gives it
back, whatever ends it; nothing is read before the parameters are checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import Refused
from broker.admin.messages import (
    Filters,
    TopicSchemas,
    entry_rows,
    payload_bytes_param,
    read_entries,
    topic_here,
)
from common.errors import ManagedLedgerClosed, StrataError

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic
    from ledger.position import Position

log = logging.getLogger(__name__)

ROUTE = lookup.TOPIC_ROUTE + "/tail"
PAYLOAD_BYTES_DEFAULT = 4096
PING_INTERVAL_S = 15.0           # a `: ping` comment after this long without an event
POLL_INTERVAL_S = 0.1            # nothing new: the reader looks again after this long
CLOSED_CHECK_S = 1.0             # how often the writer looks whether the browser went away
READ_ENTRIES_MAX = 100           # entries one read asks for
PENDING_BYTES_MAX = 16 * 1024 * 1024    # event bytes one tail holds for its browser
DROPPED_REASON = "the browser fell behind; the tail skipped ahead"


def sse(event: str, data: object) -> bytes:
    """One Server-Sent Event (`data` as one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@dataclass(eq=False)
class Outbox:
    """Events waiting for the browser, bounded in messages and bytes (the bound: drop and say so)."""

    messages_max: int
    bytes_max: int = PENDING_BYTES_MAX
    events: deque[bytes] = field(default_factory=deque)
    pending_bytes: int = 0
    dropped: int = 0               # messages dropped since the browser was last told
    ended: bool = False            # the `end` event is queued: nothing is added after it
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    def add_message(self, event: bytes) -> None:
        if self.ended:
            return
        if len(self.events) >= self.messages_max or self.pending_bytes + len(event) > self.bytes_max:
            self.dropped += len(self.events)      # skip ahead: the newest is what the browser gets next
            self.events.clear()
            self.pending_bytes = 0
        self.events.append(event)
        self.pending_bytes += len(event)
        self.ready.set()

    def end(self, reason: str) -> None:
        if not self.ended:
            self.ended = True
            self.events.append(sse("end", {"reason": reason}))
            self.ready.set()

    def take(self) -> list[bytes]:
        """Everything waiting, a `dropped` event first when messages were dropped."""
        out = list(self.events)
        if self.dropped:
            out.insert(0, sse("dropped", {"dropped": self.dropped, "reason": DROPPED_REASON}))
            self.dropped = 0
        self.events.clear()
        self.pending_bytes = 0
        self.ready.clear()
        return out


@dataclass
class _Tail:
    topic: PersistentTopic
    filters: Filters
    schemas: TopicSchemas
    payload_bytes_max: int
    outbox: Outbox


async def _follow(service: BrokerService, tail: _Tail, position: Position) -> None:
    """Read what is appended from `position` on, until the topic goes away (then `end`)."""
    topic, ml = tail.topic, tail.topic.ml
    while True:
        if topic.closing or service.topics.get(str(topic.name)) is not topic:
            tail.outbox.end("the topic was unloaded or deleted from this broker")
            return
        if position > ml.last_confirmed:
            await asyncio.sleep(POLL_INTERVAL_S)
            continue
        try:
            got = await read_entries(ml, position, READ_ENTRIES_MAX)
        except ManagedLedgerClosed:
            tail.outbox.end("the topic was unloaded or deleted from this broker")
            return
        for entry_position, data in got:
            for row in entry_rows(entry_position, data):
                if tail.filters.matches(row, tail.schemas):
                    tail.outbox.add_message(sse("message", row.to_json(tail.schemas, tail.payload_bytes_max)))
            position = ml.next_position(entry_position)
        await asyncio.sleep(0)       # a busy topic does not hold the event loop


async def _deliver(request: web.Request, response: web.StreamResponse, outbox: Outbox) -> None:
    """Write the outbox's events to the browser until `end` or the browser goes away."""
    loop = asyncio.get_running_loop()
    last_write = loop.time()
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(outbox.ready.wait(), CLOSED_CHECK_S)
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        events = outbox.take()
        if events:
            await response.write(b"".join(events))
            last_write = loop.time()
            if outbox.ended and not outbox.events:
                return
        elif loop.time() - last_write >= PING_INTERVAL_S:
            await response.write(b": ping\n\n")
            last_write = loop.time()


class _TailRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.open: set[Outbox] = set()    # the tails being served; at most console_tails_max

    async def tail(self, request: web.Request) -> web.StreamResponse:
        config = self.service.config
        filters = Filters.from_query(request.query)
        bytes_max = payload_bytes_param(request.query, PAYLOAD_BYTES_DEFAULT, config.broker_max_message_bytes)
        topic = await topic_here(self.service, request, "Tailing messages")
        if len(self.open) >= config.console_tails_max:
            raise Refused(503, f"too many live tails on this broker ({config.console_tails_max}); "
                               "close one and retry")
        outbox = Outbox(config.console_tail_queue_messages_max)
        self.open.add(outbox)
        try:
            tail = _Tail(topic, filters, await TopicSchemas.load(self.service, topic.name), bytes_max, outbox)
            return await self._stream(request, tail)
        finally:
            self.open.discard(outbox)

    async def _stream(self, request: web.Request, tail: _Tail) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no"})
        ml = tail.topic.ml
        start = ml.next_position(ml.last_confirmed)      # fixed before the browser hears `open`
        await response.prepare(request)
        await response.write(sse("open", {"topic": str(tail.topic.name), "from": str(start)}))
        reader = asyncio.get_running_loop().create_task(_follow(self.service, tail, start))
        reader.add_done_callback(lambda task: _reader_done(task, tail.outbox))
        try:
            await _deliver(request, response, tail.outbox)
        except (ConnectionError, StrataError) as exc:      # the browser went away mid-write
            log.debug("tail of %s ended: %r", tail.topic.name, exc)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        return response

    async def stop_all(self, _app: web.Application) -> None:
        """The broker stops: every tail says so and ends."""
        if not self.open:
            return
        for outbox in list(self.open):
            outbox.end("the broker is stopping")
        await asyncio.sleep(0.2)      # the writers send it before the connections are closed


def _reader_done(task: asyncio.Task, outbox: Outbox) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("a live tail's reader failed: %r", exc)
        outbox.end(f"reading the topic failed: {exc}")


def register(app: web.Application, service: BrokerService) -> None:
    routes = _TailRoutes(service)
    app.router.add_get(ROUTE, routes.tail)
    app.on_shutdown.append(routes.stop_all)
