"""entries.proto_strings: which string field, at any depth, upb handed back as bytes (not UTF-8)."""

from __future__ import annotations

from entries.proto_strings import non_utf8_field
from proto import pulsar_api_pb2 as pb


def _parsed(msg, old: bytes, new: bytes):
    data = msg.SerializeToString()
    assert data.count(old) == 1
    out = type(msg)()
    out.ParseFromString(data.replace(old, new))
    return out


def test_valid_messages_pass() -> None:
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, replicate_to=["a", "b"],
                            properties=[pb.KeyValue(key="k", value="v")])
    assert non_utf8_field(md) is None
    assert non_utf8_field(pb.CommandSend(producer_id=1, sequence_id=1)) is None   # no string fields at all


def test_each_place_a_string_can_sit() -> None:
    base = dict(producer_name="pppp", sequence_id=1, publish_time=2)
    assert non_utf8_field(_parsed(pb.MessageMetadata(**base), b"pppp", b"p\xffpp")) == "producer_name"
    repeated = pb.MessageMetadata(**base, replicate_to=["ok", "rrrr"])
    assert non_utf8_field(_parsed(repeated, b"rrrr", b"r\xferr")) == "replicate_to"
    nested = pb.MessageMetadata(**base, properties=[pb.KeyValue(key="kkkk", value="v")])
    assert non_utf8_field(_parsed(nested, b"kkkk", b"\x80kkk")) == "properties.key"
