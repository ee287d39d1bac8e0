"""Fuzz frames for the Pulsar protocol, generated from a seed (sans-IO: bytes out, no sockets).

`FrameSource(rng, names).draw(connected)` returns one `Fuzzed(kind, data, fate)`. Kinds:

    valid     a well-formed command built with the product's codec (wire.pulsar) and
              proto/pulsar_api_pb2: CONNECT, PRODUCER, SEND with a payload, SUBSCRIBE, FLOW, ACK,
              LOOKUP, PING, ...
    fields    a command of a random type whose body holds random field values: the message
              descriptor is walked, required fields always set, optional ones sometimes, integers
              drawn from edge values (0, 2^31, 2^32-1, 2^63, 2^64-1, -1 ...), ids and topic names
              from small pools so the commands meet real producers, consumers and topics
    mutated   a valid or fields frame after 1-4 byte mutations (bit flip, byte set, insertion,
              deletion, duplication, truncation) of its serialized command re-framed with the right
              sizes (reaches the protobuf parser), of a SEND's entry (reaches the metadata parser),
              or of the whole frame (mostly breaks the framing)
    size      total_size or cmd_size rewritten: 0, too small, too big, 2^31, 2^32-1, the broker's
              frame limit and one past it, random
    checksum  a SEND whose magic, CRC32C or metadata size is wrong, or that has no checksum at all
    random    random bytes, bare or behind a right frame header

Fates, what the broker must do with the frame, decided by the product's own FrameDecoder at the
broker's default frame limit plus the routing rules of docs/protocol.md §2 and §10:

    routed    decodes into commands the broker serves, or answers with ERROR: the connection stays
    closing   decodes, but the broker closes the connection: anything but CONNECT before CONNECTED,
              a second CONNECT, an AUTH_RESPONSE nobody asked for, a command it does not serve that
              names no request id
    fatal     does not decode (MalformedFrame, FrameTooLarge): the broker closes the connection
    partial   the frame is incomplete; the broker waits for the rest (the sender ends it)

What must hold: the same seed and the same calls give the same frames; every frame is at most
FRAME_BYTES_OUT_MAX bytes (what is sent, not what it declares); the fate is the decoder's verdict on
the very bytes, never a guess from the mutation. The served set mirrors broker/protocol/connection.py:
a mismatch can only end a connection earlier than predicted, never hide a broker failure.

Walking a descriptor costs tens of microseconds, so a fresh `fields` command replaces a slot of a
pool one draw in POOL_REFRESH; other draws take (and mutate) a pool entry.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c
from google.protobuf.descriptor import FieldDescriptor as _FD

from common.config import default_config
from common.errors import StrataError
from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from wire.pulsar import BODY_FIELD, FrameDecoder
from wire.pulsar import CommandType as T

FRAME_LIMIT = default_config().broker_frame_bytes_max   # the broker's default broker_frame_bytes_max
FRAME_BYTES_OUT_MAX = 16 * 1024      # no generated frame is longer (declared sizes may be anything)
POOL_SIZE = 256                      # frames kept for mutation
POOL_REFRESH = 8                     # one draw in this many makes a fresh `fields` frame
DEPTH_MAX = 3                        # nesting of generated sub-messages
REPEATED_MAX = 3                     # items of a generated repeated field
STRING_CHARS_MAX = 24
PAYLOAD_BYTES_MAX = 1024
MUTATIONS_MAX = 4
DRAWS_MAX = 64                       # draw_fated gives up after this many draws

ROUTED, CLOSING, FATAL, PARTIAL = "routed", "closing", "fatal", "partial"
KINDS = ("valid", "fields", "mutated", "size", "checksum", "random")
KIND_WEIGHTS = (10, 30, 35, 8, 7, 10)

# the commands the broker routes once READY (broker/protocol/connection.py's handler table);
# AUTH_RESPONSE is left out: with no challenge out it closes the connection
SERVED = frozenset({
    T.PING, T.PONG, T.SEND, T.PARTITIONED_METADATA, T.LOOKUP, T.PRODUCER, T.CLOSE_PRODUCER, T.SUBSCRIBE,
    T.FLOW, T.ACK, T.REDELIVER_UNACKNOWLEDGED_MESSAGES, T.CLOSE_CONSUMER, T.UNSUBSCRIBE, T.SEEK,
    T.GET_LAST_MESSAGE_ID, T.GET_TOPICS_OF_NAMESPACE, T.WATCH_TOPIC_LIST, T.WATCH_TOPIC_LIST_CLOSE,
    T.GET_SCHEMA, T.GET_OR_CREATE_SCHEMA,
})
COMMAND_TYPES = tuple(sorted(BODY_FIELD))   # every type with a body, broker-bound or not
U64_EDGES = (0, 1, 2, 127, 128, 255, 65535, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)
I64_EDGES = (-2**63, -2**31, -1, 0, 1, 2**31 - 1, 2**63 - 1)
U32_EDGES = (0, 1, 255, 65535, 2**31 - 1, 2**31, 2**32 - 1)
I32_EDGES = (-2**31, -1, 0, 1, 2**31 - 1)
BYTE_EDGES = (0x00, 0x01, 0x7F, 0x80, 0xFF)
ID_POOL = (1, 1, 1, 2, 0, 7, 2**64 - 1)   # producer/consumer ids: 1 is the session's (driver.py)
INVALID_TOPICS = ("", "persistent://only/two", "a/b", "other://public/default/x", "persistent://t/ns/sp ace")
_U32 = struct.Struct(">I")
_HEADER = struct.Struct(">II")


@dataclass(frozen=True)
class Names:
    """The pools names are drawn from: topics (the round-trip topic among them) and subscriptions."""

    topics: tuple[str, ...]
    subscriptions: tuple[str, ...]


@dataclass(frozen=True)
class Template:
    """A command before framing: the serialized BaseCommand and, for SEND/MESSAGE, the stored-form entry."""

    body: bytes
    entry: bytes | None = None

    def frame(self) -> bytes:
        entry = self.entry or b""
        return _HEADER.pack(4 + len(self.body) + len(entry), len(self.body)) + self.body + entry


@dataclass(frozen=True)
class Fuzzed:
    kind: str      # one of KINDS
    data: bytes    # the bytes to send
    fate: str      # ROUTED, CLOSING, FATAL or PARTIAL
    connects: bool = False   # it is a CONNECT the broker accepts (sent before CONNECTED)


def fate_of(data: bytes, connected: bool) -> tuple[str, bool]:
    """What the broker does with `data` on a connection that is (or is not yet) past CONNECTED,
    and whether it carries a CONNECT the broker accepts."""
    decoder = FrameDecoder(FRAME_LIMIT)
    try:
        frames = decoder.feed(data)
    except StrataError:
        return FATAL, False
    accepted = False
    for frame in frames:
        cmd = frame.command
        if not connected:
            if cmd.type != T.CONNECT:
                return CLOSING, accepted
            connected = accepted = True
        elif cmd.type not in SERVED and not _names_request(cmd):
            return CLOSING, accepted
    return (PARTIAL if decoder.buffered_bytes else ROUTED), accepted


def _names_request(cmd: pb.BaseCommand) -> bool:
    """An unserved command the broker answers with ERROR: a body with a request_id (else it closes)."""
    return any(field.name != "type" and hasattr(value, "request_id") for field, value in cmd.ListFields())


class FrameSource:
    """Fuzz frames from one seeded `random.Random` (style: randomness is injected)."""

    def __init__(self, rng: random.Random, names: Names) -> None:
        self.rng = rng
        self.names = names
        self.valid = valid_templates(names)
        self.pool: list[Template] = list(self.valid) + [self.fields_template() for _ in range(POOL_SIZE)]
        self._makers = {"valid": self._valid, "fields": self._fields, "mutated": self._mutated,
                        "size": self._size, "checksum": self._checksum, "random": self._random}

    def draw(self, connected: bool) -> Fuzzed:
        """Any frame: the kinds in KIND_WEIGHTS proportions, whatever their fate."""
        kind = self.rng.choices(KINDS, KIND_WEIGHTS)[0]
        data = self._makers[kind]()[:FRAME_BYTES_OUT_MAX] or b"\x00"   # a mutation may delete it all
        fate, connects = fate_of(data, connected)
        return Fuzzed(kind, data, fate, connects)

    def draw_fated(self, connected: bool, routed: bool) -> Fuzzed:
        """A frame the broker routes (`routed`) or one that ends the connection: draws until one
        fits, at most DRAWS_MAX times (then the last draw, whatever it is). Lets a connection carry
        many routed frames and end on one bad one, where plain draws end most connections at once."""
        for _ in range(DRAWS_MAX):
            fuzzed = self.draw(connected)
            if (fuzzed.fate == ROUTED) == routed:
                return fuzzed
        return fuzzed

    # --- the kinds -----------------------------------------------------------------------------------

    def _valid(self) -> bytes:
        return self.rng.choice(self.valid).frame()

    def _fields(self) -> bytes:
        if self.rng.randrange(POOL_REFRESH) == 0:
            fresh = self.fields_template()
            self.pool[self.rng.randrange(len(self.pool))] = fresh
            return fresh.frame()
        return self.rng.choice(self.pool).frame()

    def _mutated(self) -> bytes:
        rng = self.rng
        template = rng.choice(self.pool)
        where = rng.random()
        if where < 0.5:
            return Template(mutate(rng, template.body), template.entry).frame()
        if where < 0.65 and template.entry is not None:
            entry = mutate(rng, template.entry)
            return Template(template.body, reseal(entry) if rng.random() < 0.5 else entry).frame()
        return mutate(rng, template.frame(), truncate=True)

    def _size(self) -> bytes:
        rng = self.rng
        data = bytearray(rng.choice(self.pool).frame())
        offset = rng.choice((0, 0, 4))
        actual = _U32.unpack_from(data, offset)[0]
        wrong = rng.choice((0, 1, 3, 4, actual - 1, actual + 1, actual + rng.randint(2, 1000), 2**31 - 1, 2**31,
                            2**32 - 1, FRAME_LIMIT, FRAME_LIMIT + 1, rng.getrandbits(32)))
        _U32.pack_into(data, offset, max(0, wrong) & 0xFFFFFFFF)
        return bytes(data)

    def _checksum(self) -> bytes:
        rng = self.rng
        sends = [t for t in self.valid if t.entry is not None]
        template = rng.choice(sends)
        entry = bytearray(template.entry or b"")
        how = rng.randrange(4)
        if how == 0:      # wrong magic
            entry[0:2] = rng.choice((b"\x0e\x02", b"\x00\x00", b"\x01\x0e", rng.randbytes(2)))
        elif how == 1:    # wrong CRC32C: the broker answers SEND_ERROR ChecksumError and keeps the connection
            entry[2 + rng.randrange(4)] ^= 1 << rng.randrange(8)
        elif how == 2:    # wrong metadata size
            md_size = _U32.unpack_from(entry, 6)[0]
            _U32.pack_into(entry, 6, rng.choice((0, md_size - 1, md_size + 1, 2**32 - 1, rng.getrandbits(32))))
        else:             # no magic and CRC at all (protocol < 6): the broker computes one
            del entry[0:6]
        return Template(template.body, bytes(entry)).frame()

    def _random(self) -> bytes:
        rng = self.rng
        junk = rng.randbytes(rng.choice((rng.randint(1, 16), rng.randint(1, 256), rng.randint(1, 1024))))
        if rng.random() < 0.5:
            return junk
        return _HEADER.pack(len(junk) + 4, len(junk)) + junk   # framed right: the protobuf parser decides

    # --- descriptor-driven commands -------------------------------------------------------------------

    def fields_template(self) -> Template:
        rng = self.rng
        kind = rng.choice(COMMAND_TYPES)
        cmd = pb.BaseCommand(type=kind)  # type: ignore[arg-type]
        body = getattr(cmd, BODY_FIELD[kind])
        body.SetInParent()
        self._fill(body, 1)
        if kind == T.PRODUCER and body.topic == self.names.topics[0]:
            # Exclusive access modes are the protocol's own way to lock other producers out (with
            # fencing: at once); on the round-trip topic they would stop the real client by design
            body.ClearField("producer_access_mode")
        if kind in (T.SEND, T.MESSAGE):
            metadata = pb.MessageMetadata()
            self._fill(metadata, 1)
            return Template(cmd.SerializePartialToString(),
                            build_entry(metadata.SerializePartialToString(), rng.randbytes(rng.randrange(64))))
        return Template(cmd.SerializePartialToString())

    def _fill(self, msg: Any, depth: int) -> None:
        rng = self.rng
        for field in msg.DESCRIPTOR.fields:
            if field.is_repeated:
                for _ in range(rng.choice((0, 0, 1, 2, REPEATED_MAX))):
                    if field.type == _FD.TYPE_MESSAGE:
                        if depth < DEPTH_MAX:
                            self._fill(getattr(msg, field.name).add(), depth + 1)
                    else:
                        getattr(msg, field.name).append(self._scalar(field))
                continue
            if not field.is_required and rng.random() < 0.6:
                continue
            if field.type == _FD.TYPE_MESSAGE:
                if depth < DEPTH_MAX or field.is_required:
                    child = getattr(msg, field.name)
                    child.SetInParent()
                    self._fill(child, depth + 1)
            else:
                setattr(msg, field.name, self._scalar(field))

    def _scalar(self, field: Any) -> Any:
        rng = self.rng
        name, kind = field.name, field.type
        if kind == _FD.TYPE_STRING:
            return self._string(name)
        if kind == _FD.TYPE_BYTES:
            return rng.randbytes(rng.randrange(STRING_CHARS_MAX))
        if kind == _FD.TYPE_BOOL:
            return rng.random() < 0.5
        if kind == _FD.TYPE_ENUM:
            return rng.choice(field.enum_type.values).number
        if name in ("producer_id", "consumer_id"):
            return rng.choice(ID_POOL)
        if name == "request_id":
            return rng.randrange(1, 1 << 16)
        if kind in (_FD.TYPE_DOUBLE, _FD.TYPE_FLOAT):
            return rng.choice((0.0, -1.0, 1e300, rng.random()))
        edges = {_FD.TYPE_UINT64: U64_EDGES, _FD.TYPE_FIXED64: U64_EDGES, _FD.TYPE_UINT32: U32_EDGES,
                 _FD.TYPE_FIXED32: U32_EDGES, _FD.TYPE_INT32: I32_EDGES, _FD.TYPE_SINT32: I32_EDGES,
                 _FD.TYPE_SFIXED32: I32_EDGES}.get(kind, I64_EDGES)
        roll = rng.random()
        if roll < 0.4:
            return rng.choice(edges)
        if roll < 0.8:
            return rng.randrange(11)
        return rng.randint(min(edges), max(edges))

    def _string(self, name: str) -> str:
        rng = self.rng
        if name == "topic" and rng.random() < 0.9:
            return rng.choice(self.names.topics if rng.random() < 0.85 else INVALID_TOPICS)
        if name == "subscription" and rng.random() < 0.9:
            return rng.choice(self.names.subscriptions)
        roll = rng.random()
        if roll < 0.1:
            return ""
        if roll < 0.15:
            return "x" * rng.choice((256, 4096))
        return "".join(chr(rng.choice((rng.randrange(32, 127), rng.randrange(32, 0x2FF))))
                       for _ in range(rng.randrange(1, STRING_CHARS_MAX)))


# ------------------------------------------------------------------------------------------------
# Byte mutations


def mutate(rng: random.Random, data: bytes, truncate: bool = False) -> bytes:
    """`data` after 1..MUTATIONS_MAX random byte mutations (and, with `truncate`, maybe cut short)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, MUTATIONS_MAX)):
        op = rng.randrange(6 if truncate else 5)
        at = rng.randrange(len(out) + 1)
        if op == 0 and out:
            at = min(at, len(out) - 1)
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rng.choice(BYTE_EDGES + (rng.randrange(256),))
        elif op == 2:
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:
            del out[at:at + rng.randint(1, 8)]
        elif op == 4:
            out[at:at] = out[at:at + rng.randint(1, 16)]
        elif op == 5:
            del out[at:]
    return bytes(out)


def reseal(entry: bytes) -> bytes:
    """A stored-form entry with its CRC32C recomputed (what a client with a bug would still checksum)."""
    if len(entry) < 6:
        return entry
    return entry[:2] + _U32.pack(crc32c(entry[6:])) + entry[6:]


# ------------------------------------------------------------------------------------------------
# Well-formed commands


def _cmd(kind: int, field: str, body: Any) -> bytes:
    cmd = pb.BaseCommand(type=kind)  # type: ignore[arg-type]
    getattr(cmd, field).CopyFrom(body)
    return cmd.SerializeToString()


def valid_templates(names: Names) -> list[Template]:
    """One well-formed command of each kind a client sends, on the pools' first topic and
    subscription, with producer and consumer id 1 (the session's, see driver.py)."""
    topic, sub = names.topics[0], names.subscriptions[0]
    mid = pb.MessageIdData(ledgerId=1, entryId=0)
    metadata = pb.MessageMetadata(producer_name="fuzz", sequence_id=0, publish_time=1_700_000_000_000)
    send = pb.CommandSend(producer_id=1, sequence_id=0)
    bodies = [
        _cmd(T.CONNECT, "connect", pb.CommandConnect(client_version="strata-fuzz", protocol_version=20)),
        _cmd(T.PRODUCER, "producer", pb.CommandProducer(topic=topic, producer_id=2, request_id=3)),
        _cmd(T.SUBSCRIBE, "subscribe", pb.CommandSubscribe(topic=topic, subscription=sub, consumer_id=2,
                                                           request_id=4, subType=pb.CommandSubscribe.Shared)),
        _cmd(T.FLOW, "flow", pb.CommandFlow(consumer_id=1, messagePermits=100)),
        _cmd(T.ACK, "ack", pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Individual, message_id=[mid])),
        _cmd(T.LOOKUP, "lookupTopic", pb.CommandLookupTopic(topic=topic, request_id=5)),
        _cmd(T.PARTITIONED_METADATA, "partitionMetadata",
             pb.CommandPartitionedTopicMetadata(topic=topic, request_id=6)),
        _cmd(T.PING, "ping", pb.CommandPing()),
        _cmd(T.GET_LAST_MESSAGE_ID, "getLastMessageId", pb.CommandGetLastMessageId(consumer_id=1, request_id=7)),
        _cmd(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, "redeliverUnacknowledgedMessages",
             pb.CommandRedeliverUnacknowledgedMessages(consumer_id=1)),
        _cmd(T.SEEK, "seek", pb.CommandSeek(consumer_id=1, request_id=8, message_id=mid)),
        _cmd(T.CLOSE_PRODUCER, "close_producer", pb.CommandCloseProducer(producer_id=2, request_id=9)),
        _cmd(T.CONSUMER_STATS, "consumerStats", pb.CommandConsumerStats(consumer_id=1, request_id=10)),
    ]
    templates = [Template(body) for body in bodies]
    for size in (0, 16, PAYLOAD_BYTES_MAX):
        templates.append(Template(_cmd(T.SEND, "send", send), build_entry(metadata, bytes(size))))
    return templates
