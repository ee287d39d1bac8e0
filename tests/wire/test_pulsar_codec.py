"""wire.pulsar as pure bytes: framing, limits, strict parsing, checksums, every encoder."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from google.protobuf.descriptor import FieldDescriptor

from common.errors import (
    ChecksumError,
    FrameTooLarge,
    InvariantViolation,
    MalformedFrame,
    PulsarServerError,
    TopicNotFound,
)
from entries import entry as entry_format
from proto import pulsar_api_pb2 as pb
from wire import pulsar as codec
from wire.pulsar import CommandType as T

LIMIT = 1 << 20
U64_MAX = (1 << 64) - 1


def decode_one(data: bytes, limit: int = LIMIT) -> codec.Frame:
    frames = codec.FrameDecoder(limit).feed(data)
    assert len(frames) == 1
    return frames[0]


def make_entry(payload: bytes = b"hello", **md_fields: object) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1000, **md_fields)
    return entry_format.build_entry(md, payload)


def send_frame(entry: bytes, producer_id: int = 1, sequence_id: int = 1) -> bytes:
    cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id))
    return codec.encode_payload_command(cmd, entry)


def simple_frame(cmd_bytes: bytes) -> bytes:
    return struct.pack(">II", len(cmd_bytes) + 4, len(cmd_bytes)) + cmd_bytes


# --- the proto and the error tree ------------------------------------------------------------

def test_server_error_values_match_proto_by_name() -> None:
    ours = {k: v for k, v in vars(PulsarServerError).items() if not k.startswith("_")}
    proto = {v.name: v.number for v in pb.ServerError.DESCRIPTOR.values}
    assert ours == proto


def test_every_body_field_number_equals_its_type_value() -> None:
    fields = {f.number: f for f in pb.BaseCommand.DESCRIPTOR.fields if f.name != "type"}
    for number, field in fields.items():
        assert pb.BaseCommand.Type.Name(number)  # a type exists for every body
        assert field.message_type is not None
    for name in ("CONNECT", "SEND", "MESSAGE", "ACK", "SEEK", "ACK_RESPONSE", "GET_SCHEMA_RESPONSE"):
        assert codec.BODY_FIELD[getattr(T, name)] in {f.name for f in fields.values()}


def test_required_fields_follow_protocol_md() -> None:
    required = {f.name for f in pb.CommandConnected.DESCRIPTOR.fields if f.is_required}
    assert required == {"server_version"}
    assert {f.name for f in pb.CommandError.DESCRIPTOR.fields if f.is_required} == {"request_id", "error", "message"}
    assert {f.name for f in pb.CommandSendError.DESCRIPTOR.fields if f.is_required} == \
        {"producer_id", "sequence_id", "error", "message"}
    assert {f.name for f in pb.MessageMetadata.DESCRIPTOR.fields if f.is_required} == \
        {"producer_name", "sequence_id", "publish_time"}
    assert {f.name for f in pb.CommandGetLastMessageIdResponse.DESCRIPTOR.fields if f.is_required} == \
        {"last_message_id", "request_id"}
    assert pb.MessageIdData().partition == -1 and pb.CommandProducerSuccess().last_sequence_id == -1


# --- round trips of every command -------------------------------------------------------------

def _fill_required(msg: object) -> None:
    """Set every required field (recursively) to a sample value."""
    for field in msg.DESCRIPTOR.fields:
        if not field.is_required:
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill_required(getattr(msg, field.name))
        elif field.type == FieldDescriptor.TYPE_ENUM:
            setattr(msg, field.name, field.enum_type.values[-1].number)
        elif field.type == FieldDescriptor.TYPE_STRING:
            setattr(msg, field.name, "s-" + field.name)
        elif field.type == FieldDescriptor.TYPE_BYTES:
            setattr(msg, field.name, b"b")
        elif field.type == FieldDescriptor.TYPE_BOOL:
            setattr(msg, field.name, True)
        else:
            setattr(msg, field.name, 7)


@pytest.mark.parametrize("type_value", sorted(set(codec.BODY_FIELD) - {T.SEND, T.MESSAGE}))
def test_every_simple_command_round_trips(type_value: int) -> None:
    cmd = pb.BaseCommand(type=type_value)
    body = getattr(cmd, codec.BODY_FIELD[type_value])
    body.SetInParent()
    _fill_required(body)
    frame = decode_one(codec.encode_command(cmd))
    assert frame.command == cmd and frame.entry is None and frame.checksum_ok


def test_client_commands_round_trip_with_realistic_values() -> None:
    earliest = pb.MessageIdData(ledgerId=U64_MAX, entryId=U64_MAX)
    cmds = [
        pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
            client_version="Pulsar-CPP-v4.2.0", auth_method_name="none", protocol_version=20,
            feature_flags=pb.FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True))),
        pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic="persistent://public/default/t", subscription="reader-abc", subType=pb.CommandSubscribe.Key_Shared,
            consumer_id=0, request_id=0, durable=False, start_message_id=earliest,
            keySharedMeta=pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=0, end=65535)]))),
        pb.BaseCommand(type=T.ACK, ack=pb.CommandAck(
            consumer_id=3, ack_type=pb.CommandAck.Individual, request_id=9,
            message_id=[pb.MessageIdData(ledgerId=1, entryId=2, ack_set=[5]),
                        pb.MessageIdData(ledgerId=1, entryId=3, ack_set=[-1, 2])])),
        pb.BaseCommand(type=T.SEEK, seek=pb.CommandSeek(consumer_id=1, request_id=2, message_publish_time=0)),
        pb.BaseCommand(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                       redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                           consumer_id=0, message_ids=[pb.MessageIdData(ledgerId=4, entryId=5)])),
        pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
            topic="persistent://public/default/t", producer_id=0, request_id=1, epoch=0,
            user_provided_producer_name=False, producer_access_mode=pb.Shared)),
    ]
    decoded = codec.FrameDecoder(LIMIT).feed(b"".join(codec.encode_command(c) for c in cmds))
    assert [f.command for f in decoded] == cmds
    sub = decoded[1].command.subscribe
    assert (sub.start_message_id.ledgerId, sub.start_message_id.entryId) == (U64_MAX, U64_MAX)


def test_reply_builders_fill_required_fields_and_decode() -> None:
    replies = {
        codec.encode_connected("strata", 20, 5 << 20): T.CONNECTED,
        codec.encode_success(4): T.SUCCESS,
        codec.encode_error(5, PulsarServerError.ConsumerBusy, "busy"): T.ERROR,
        codec.encode_producer_success(1, "gen-1"): T.PRODUCER_SUCCESS,
        codec.encode_send_error(1, 2, PulsarServerError.ChecksumError, ""): T.SEND_ERROR,
        codec.encode_lookup_response(3, "pulsar://h:1"): T.LOOKUP_RESPONSE,
        codec.encode_partitioned_metadata_response(2, 4): T.PARTITIONED_METADATA_RESPONSE,
        codec.encode_close_producer(1, 9): T.CLOSE_PRODUCER,
        codec.encode_close_consumer(1, 9, "pulsar://other:1"): T.CLOSE_CONSUMER,
        codec.encode_active_consumer_change(2, True): T.ACTIVE_CONSUMER_CHANGE,
        codec.encode_get_last_message_id_response(6, 3, -1, mark_delete=(3, -1)): T.GET_LAST_MESSAGE_ID_RESPONSE,
        codec.encode_ack_response(1, 8): T.ACK_RESPONSE,
        codec.encode_ping(): T.PING,
        codec.encode_pong(): T.PONG,
        codec.encode_get_topics_of_namespace_response(1, ["persistent://a/b/c"]): T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        codec.encode_get_schema_response(3): T.GET_SCHEMA_RESPONSE,
        codec.encode_send_receipt(1, 2, 3, 4): T.SEND_RECEIPT,
    }
    for data, type_value in replies.items():
        cmd = decode_one(data).command
        assert cmd.type == type_value and cmd.IsInitialized()
        assert struct.unpack(">I", data[:4])[0] == len(data) - 4


def test_reply_builder_values() -> None:
    c = decode_one(codec.encode_connected("strata", 20, 5242880)).command.connected
    assert (c.server_version, c.protocol_version, c.max_message_size) == ("strata", 20, 5242880)
    e = decode_one(codec.encode_error(5, PulsarServerError.ConsumerBusy, "")).command.error
    assert e.HasField("message") and e.error == pb.ConsumerBusy
    lk = decode_one(codec.encode_lookup_response(3, "pulsar://h:1")).command.lookupTopicResponse
    assert (lk.response, lk.brokerServiceUrl, lk.authoritative) == (
        pb.CommandLookupTopicResponse.Connect, "pulsar://h:1", True)
    failed = decode_one(codec.encode_lookup_response(3, server_error=PulsarServerError.ServiceNotReady,
                                                     message="loading")).command.lookupTopicResponse
    assert failed.response == pb.CommandLookupTopicResponse.Failed and failed.error == pb.ServiceNotReady
    pm = decode_one(codec.encode_partitioned_metadata_response(2, 0)).command.partitionMetadataResponse
    assert pm.HasField("response") and pm.response == pb.CommandPartitionedTopicMetadataResponse.Success
    assert pm.HasField("partitions") and pm.partitions == 0
    pmf = decode_one(codec.encode_partitioned_metadata_response(
        2, server_error=PulsarServerError.MetadataError, message="x")).command.partitionMetadataResponse
    assert pmf.response == pb.CommandPartitionedTopicMetadataResponse.Failed and pmf.error == pb.MetadataError
    ps = decode_one(codec.encode_producer_success(1, "gen-1", 41)).command.producer_success
    assert (ps.producer_name, ps.last_sequence_id, ps.producer_ready) == ("gen-1", 41, True)
    glm = decode_one(codec.encode_get_last_message_id_response(6, 3, -1, mark_delete=(3, 0))).command
    last = glm.getLastMessageIdResponse.last_message_id
    assert (last.ledgerId, last.entryId, last.partition) == (3, U64_MAX, -1)
    assert glm.getLastMessageIdResponse.consumer_mark_delete_position.entryId == 0
    gs = decode_one(codec.encode_get_schema_response(3)).command.getSchemaResponse
    assert gs.error_code == pb.TopicNotFound
    ack = decode_one(codec.encode_ack_response(1, 8, PulsarServerError.NotAllowedError, "no")).command.ackResponse
    assert (ack.request_id, ack.error, ack.message) == (8, pb.NotAllowedError, "no")


def test_encode_error_for_maps_strata_errors() -> None:
    cmd = decode_one(codec.encode_error_for(7, TopicNotFound("gone", topic="t"))).command.error
    assert (cmd.request_id, cmd.error) == (7, pb.TopicNotFound) and "gone" in cmd.message
    unknown = decode_one(codec.encode_error_for(7, MalformedFrame("x"))).command.error
    assert unknown.error == pb.UnknownError
    assert decode_one(codec.encode_error_for(1, ChecksumError())).command.error.error == pb.ChecksumError


def test_negotiate_protocol_version() -> None:
    assert codec.negotiate_protocol_version(20) == 20
    assert codec.negotiate_protocol_version(25) == codec.PROTOCOL_VERSION_MAX
    assert codec.negotiate_protocol_version(12) == 12


def test_encode_command_refuses_missing_required_fields() -> None:
    with pytest.raises(InvariantViolation):
        codec.encode_command(pb.BaseCommand(type=T.ERROR, error=pb.CommandError(request_id=1)))


# --- fast paths are the same bytes as the generic path ------------------------------------------

def test_send_receipt_fast_path_equals_protobuf() -> None:
    for args in [(0, 0, 0, 0), (1, 2**40, 123456789, 2**33), (U64_MAX, U64_MAX, 5, 6)]:
        pid, seq, ledger, entry = args
        cmd = pb.BaseCommand(type=T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
            producer_id=pid, sequence_id=seq, message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry)))
        assert codec.encode_send_receipt(*args) == codec.encode_command(cmd)
    hs = decode_one(codec.encode_send_receipt(1, 2, 3, 4, highest_sequence_id=9)).command.send_receipt
    assert hs.highest_sequence_id == 9 and not hs.message_id.HasField("partition")


@pytest.mark.parametrize("ack_set", [None, [], [6], [-1, 2**63, 5]])
@pytest.mark.parametrize("partition, redelivery", [(-1, 0), (3, 2)])
def test_message_fast_path_equals_protobuf_and_carries_entry(ack_set, partition, redelivery) -> None:
    entry = make_entry(b"x" * 300)
    data = codec.encode_message(11, 22, 33, partition, redelivery, ack_set, entry)
    expected = pb.CommandMessage(consumer_id=11,
                                 message_id=pb.MessageIdData(ledgerId=22, entryId=33, partition=partition))
    if redelivery:
        expected.redelivery_count = redelivery
    expected.ack_set.extend(codec.to_int64(w) for w in ack_set or [])
    assert data == codec.encode_payload_command(pb.BaseCommand(type=T.MESSAGE, message=expected), entry)
    frame = decode_one(data)
    assert frame.entry == entry and frame.checksum_ok
    assert struct.unpack(">I", data[:4])[0] == len(data) - 4
    prefix = codec.encode_message_prefix(11, 22, 33, partition, redelivery, ack_set, len(entry))
    assert prefix + entry == data


def test_to_int64() -> None:
    assert codec.to_int64(2**64 - 1) == -1 and codec.to_int64(2**63) == -(2**63) and codec.to_int64(6) == 6
    assert codec.to_int64(-2) == -2


# --- payload frames -----------------------------------------------------------------------------

def test_send_entry_is_the_tail_from_the_magic() -> None:
    entry = make_entry(b"payload", partition_key="k")
    frame = decode_one(send_frame(entry, 4, 9))
    assert frame.entry == entry and isinstance(frame.entry, bytes) and frame.checksum_ok
    assert (frame.command.send.producer_id, frame.command.send.sequence_id) == (4, 9)


def test_checksum_mismatch_is_reported_not_raised() -> None:
    entry = bytearray(make_entry(b"payload"))
    entry[-1] ^= 0x01
    frame = decode_one(send_frame(bytes(entry)))
    assert not frame.checksum_ok and frame.entry == bytes(entry)
    assert not entry_format.verify_entry_checksum(frame.entry)
    corrupt_crc = bytearray(make_entry(b"payload"))
    corrupt_crc[3] ^= 0xFF
    assert not decode_one(send_frame(bytes(corrupt_crc))).checksum_ok


def test_send_without_magic_gets_magic_and_crc() -> None:
    entry = make_entry(b"old client")
    frame = decode_one(send_frame(entry[6:]))
    assert frame.entry == entry and frame.checksum_ok
    assert entry_format.verify_entry_checksum(frame.entry)


def test_message_with_broker_entry_metadata_is_skipped() -> None:
    entry = make_entry(b"m")
    bem = pb.BrokerEntryMetadata(broker_timestamp=5, index=6).SerializeToString()
    cmd = pb.BaseCommand(type=T.MESSAGE, message=pb.CommandMessage(
        consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=2)))
    data = codec.encode_payload_command(cmd, b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + entry)
    frame = decode_one(data)
    assert frame.entry == entry and frame.checksum_ok


def test_crc32c_is_castagnoli() -> None:
    assert google_crc32c.value(b"123456789") == 0xE3069283


# --- splitting, limits, malformed input ----------------------------------------------------------

def _stream() -> tuple[bytes, list[pb.BaseCommand]]:
    parts = [codec.encode_ping(), send_frame(make_entry(b"a" * 50), 1, 1), codec.encode_success(3),
             codec.encode_message(1, 2, 3, -1, 0, [6], make_entry(b"b" * 20)), send_frame(make_entry(b""), 2, 2)]
    return b"".join(parts), [decode_one(p).command for p in parts]


def test_split_at_every_byte_boundary() -> None:
    data, commands = _stream()
    for cut in range(len(data) + 1):
        decoder = codec.FrameDecoder(LIMIT)
        frames = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
        assert [f.command for f in frames] == commands, cut
        assert all(f.checksum_ok for f in frames) and decoder.buffered_bytes == 0


def test_byte_by_byte_and_three_way_splits() -> None:
    data, commands = _stream()
    decoder = codec.FrameDecoder(LIMIT)
    frames = [f for i in range(len(data)) for f in decoder.feed(data[i:i + 1])]
    assert [f.command for f in frames] == commands
    for a in range(0, len(data), 7):
        for b in range(a, len(data), 11):
            decoder = codec.FrameDecoder(LIMIT)
            got = decoder.feed(data[:a]) + decoder.feed(data[a:b]) + decoder.feed(data[b:])
            assert len(got) == len(commands)


def test_oversize_frame_refused_from_its_size_field_alone() -> None:
    decoder = codec.FrameDecoder(1000)
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">I", 1001))
    assert decoder.buffered_bytes == 0
    with pytest.raises(FrameTooLarge):  # the stream stays failed
        decoder.feed(codec.encode_ping())


def test_oversize_frame_after_good_frames_and_exact_limit_accepted() -> None:
    ping = codec.encode_ping()
    limit = len(ping) - 4
    assert len(codec.FrameDecoder(limit).feed(ping * 3)) == 3
    decoder = codec.FrameDecoder(limit)
    with pytest.raises(FrameTooLarge):
        decoder.feed(ping + struct.pack(">I", limit + 1) + b"\0" * 3)
    decoder = codec.FrameDecoder(limit)
    decoder.feed(ping[:2])
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\xff\xff")


def test_buffering_is_bounded_by_one_frame() -> None:
    entry = make_entry(b"z" * 5000)
    data = send_frame(entry)
    decoder = codec.FrameDecoder(len(data))
    assert decoder.feed(data[:-1]) == []
    assert decoder.buffered_bytes == len(data) - 1
    assert decoder.feed(data[-1:])[0].entry == entry and decoder.buffered_bytes == 0


MALFORMED = {
    "total_size below cmd_size field": struct.pack(">I", 2) + b"\0\0",
    "cmd_size beyond frame": struct.pack(">II", 8, 100) + b"\0" * 4,
    "protobuf garbage": simple_frame(b"\xff\xff\xff\xff"),
    "missing type": simple_frame(b""),
    "unknown type value": simple_frame(b"\x08\x63"),
    "missing body": simple_frame(pb.BaseCommand(type=T.SUCCESS).SerializeToString()),
    "missing required in body": simple_frame(
        pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1)).SerializePartialToString()),
    "trailing bytes after simple command": struct.pack(">II", 4 + 5 + 3, 5) +
        pb.BaseCommand(type=T.PING, ping=pb.CommandPing()).SerializeToString() + b"abc",
    "send without metadata": send_frame(b"\x0e\x01\0\0"),
    "send metadata size beyond frame": send_frame(b"\x0e\x01" + b"\0" * 4 + struct.pack(">I", 999) + b"md"),
    "send without magic and short": send_frame(b"\0\0"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_frames(name: str) -> None:
    decoder = codec.FrameDecoder(LIMIT)
    with pytest.raises(MalformedFrame):
        decoder.feed(MALFORMED[name])
    with pytest.raises(MalformedFrame):
        decoder.feed(codec.encode_ping())


def test_known_but_bodiless_type_decodes_for_the_broker_to_refuse() -> None:
    frame = decode_one(simple_frame(pb.BaseCommand(type=T.NEW_TXN).SerializeToString()))
    assert frame.command.type == T.NEW_TXN


def test_decoder_rejects_a_silly_limit() -> None:
    with pytest.raises(InvariantViolation):
        codec.FrameDecoder(4)


def _with_bytes_replaced(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1
    return data.replace(old, new)


def test_string_field_that_is_not_utf8_is_malformed() -> None:
    """Found by `strata perf fuzz`: upb hands back a proto2 string that is not UTF-8 as bytes, and
    the broker's CONNECT handling crashed on `client_version.startswith(...)`. Refused here."""
    body = pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
        client_version="fuzz-client", protocol_version=20)).SerializeToString()
    bad = _with_bytes_replaced(body, b"fuzz-client", b"fuzz\xffclient")
    with pytest.raises(MalformedFrame, match="not UTF-8"):
        codec.FrameDecoder(LIMIT).feed(struct.pack(">II", len(bad) + 4, len(bad)) + bad)


def test_nested_and_repeated_strings_that_are_not_utf8_are_malformed() -> None:
    sub = pb.CommandSubscribe(topic="t", subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1,
                              request_id=1, metadata=[pb.KeyValue(key="k", value="vvvv")])
    body = pb.BaseCommand(type=T.SUBSCRIBE, subscribe=sub).SerializeToString()
    bad = _with_bytes_replaced(body, b"vvvv", b"v\xc3(v")
    with pytest.raises(MalformedFrame, match=r"metadata\.value"):
        codec.parse_command(bad)
    assert codec.parse_command(body).subscribe.metadata[0].value == "vvvv"


def test_entry_whose_metadata_string_is_not_utf8_is_malformed() -> None:
    entry = make_entry(b"payload", partition_key="kkkk")
    md_size = struct.unpack_from(">I", entry, 6)[0]
    md = _with_bytes_replaced(entry[10:10 + md_size], b"kkkk", b"k\xffkk")
    with pytest.raises(MalformedFrame, match="partition_key"):
        entry_format.parse_entry(entry_format.build_entry(md, b"payload"))
