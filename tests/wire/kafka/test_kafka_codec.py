"""wire.kafka.codec: every API and version in the tables round-trips, header versions follow Kafka's
rules, and bad frames raise typed errors carrying the request's ids."""

import struct

import pytest

from common.errors import CODE_TO_ERROR
from wire.kafka import codec
from wire.kafka.errors import ErrorCode, KafkaCodecError, MalformedRequest, UnknownApi, UnsupportedVersion
from wire.kafka.schemas import REQUESTS, RESPONSES


def _in(r, v):
    return r is not None and r[0] <= v <= r[1]


def sample(fields, version, flexible, salt=1):
    """A body with a non-default value in every field the version carries."""
    body = {}
    for i, f in enumerate(fields):
        if not _in(f["versions"], version):
            continue
        body[f["key"]] = _value(f, f["type"], version, flexible, salt + i)
    return body


def _value(f, ftype, version, flexible, salt):
    if ftype.startswith("[]"):
        inner = ftype[2:]
        if inner == "struct":
            return [sample(f["fields"], version, flexible, salt + k) for k in range(2)]
        return [_value(f, inner, version, flexible, salt + k) for k in range(3)]
    if ftype == "struct":
        return sample(f["fields"], version, flexible, salt)
    return {
        "int8": 7 + salt % 50, "int16": 300 + salt, "int32": 70000 + salt, "int64": (1 << 40) + salt,
        "uint16": 60000 + salt, "float64": 1.5 + salt, "bool": True, "uuid": bytes(range(salt, salt + 16)),
        "string": f"s\u00e9-{salt}", "bytes": b"\x00b" * salt, "records": b"\x01r" * salt,
    }[ftype]


def _check(decoded, sent, fields, version):
    for f in fields:
        assert f["key"] in decoded, f["key"]
        if not _in(f["versions"], version):
            continue
        got, want = decoded[f["key"]], sent[f["key"]]
        if f["type"] == "struct":
            _check(got, want, f["fields"], version)
        elif f["type"] == "[]struct":
            assert len(got) == len(want)
            for g, w in zip(got, want):
                _check(g, w, f["fields"], version)
        else:
            assert got == want, f["key"]


CASES = [(k, v) for k, msg in REQUESTS.items() for v in range(msg["valid"][0], msg["valid"][1] + 1)]


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_request_round_trip(api_key, version):
    flexible = codec.is_flexible(api_key, version)
    body = sample(REQUESTS[api_key]["fields"], version, flexible)
    frame = codec.encode_request(api_key, version, 12345, "client-1", body)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    req = codec.decode_request(memoryview(frame)[4:])
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (api_key, version, 12345, "client-1")
    _check(req.body, body, REQUESTS[api_key]["fields"], version)


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_response_round_trip(api_key, version):
    flexible = codec.is_flexible(api_key, version)
    body = sample(RESPONSES[api_key]["fields"], version, flexible)
    frame = codec.encode_response(api_key, version, 777, body)
    corr, decoded = codec.decode_response(api_key, version, frame[4:])
    assert corr == 777
    _check(decoded, body, RESPONSES[api_key]["fields"], version)


def test_empty_body_takes_defaults_and_fills_absent_fields():
    frame = codec.encode_request(1, 4, 1, None, {})
    req = codec.decode_request(frame[4:])
    assert req.client_id is None
    assert req.body["max_bytes"] == 0x7FFFFFFF and req.body["session_epoch"] == -1
    assert req.body["rack_id"] == "" and req.body["topics"] == []  # v11 field, absent in v4: its default


def test_records_accept_a_list_of_buffers():
    parts = [b"abc", bytearray(b"de"), memoryview(b"fgh")]
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": parts}]}]}
    for version in (11, 12):
        _, decoded = codec.decode_response(1, version, codec.encode_response(1, version, 1, body)[4:])
        assert decoded["responses"][0]["partitions"][0]["records"] == b"abcdefgh"


def test_api_versions_response_header_is_v0_even_when_flexible():
    frame = codec.encode_response(18, 3, 5, {"error_code": 0, "api_keys": []})
    assert frame[4:8] == struct.pack(">i", 5)
    assert frame[8:10] == b"\x00\x00"  # ErrorCode right after the correlation id: no tagged section
    meta = codec.encode_response(3, 12, 5, {})
    assert meta[8] == 0  # response header v1: empty tagged section


def test_client_id_is_classic_in_request_header_v2():
    frame = codec.encode_request(18, 3, 9, "abc", {"client_software_name": "n", "client_software_version": "1"})
    assert frame[12:17] == b"\x00\x03abc"
    assert frame[17] == 0  # header tagged fields
    v1 = codec.encode_request(18, 2, 9, "abc", {})
    assert v1[12:] == b"\x00\x03abc"  # header v1, empty v2 body


def test_api_versions_error_response_is_v0_with_own_range():
    frame = codec.api_versions_error_response(42)
    corr, body = codec.decode_response(18, 0, frame[4:])
    assert corr == 42 and body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_list_offsets_v0_is_decodable():
    body = {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]}
    req = codec.decode_request(codec.encode_request(2, 0, 1, "rdkafka", body)[4:])
    assert req.body["topics"][0]["partitions"][0]["max_num_offsets"] == 1
    resp = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "old_style_offsets": [5]}]}]}
    _, decoded = codec.decode_response(2, 0, codec.encode_response(2, 0, 1, resp)[4:])
    assert decoded["topics"][0]["partitions"][0]["old_style_offsets"] == [5]


def _header(api_key, version, corr):
    return struct.pack(">hhi", api_key, version, corr)


def test_unknown_api_and_unsupported_version_carry_ids():
    with pytest.raises(UnknownApi) as err:
        codec.decode_request(_header(999, 0, 77) + b"\x00\x00")
    assert err.value.kafka_code == ErrorCode.INVALID_REQUEST and err.value.correlation_id == 77
    with pytest.raises(UnsupportedVersion) as err2:
        codec.decode_request(_header(18, 5, 78) + b"\x00\x00")
    assert err2.value.kafka_code == ErrorCode.UNSUPPORTED_VERSION
    assert (err2.value.api_key, err2.value.api_version, err2.value.correlation_id) == (18, 5, 78)
    with pytest.raises(UnsupportedVersion):
        codec.decode_request(_header(0, 2, 1) + b"\x00\x00")  # Produce v0-2: removed


@pytest.mark.parametrize("body", [
    b"", b"\x00", b"\xff\xfe", b"\x00\x01a" + b"\x7f\xff\xff\xff",  # client id cut; topics count past the end
    b"\x00\x00" + b"\xff\xff\xff\xfe",  # negative array count
])
def test_malformed_bodies_raise_with_ids(body):
    with pytest.raises(MalformedRequest) as err:
        codec.decode_request(_header(3, 5, 31) + body)
    assert err.value.kafka_code == ErrorCode.INVALID_REQUEST
    assert (err.value.api_key, err.value.api_version, err.value.correlation_id) == (3, 5, 31)


def test_truncated_header_and_frame_length():
    with pytest.raises(MalformedRequest) as err:
        codec.decode_request(b"\x00\x03\x00")
    assert err.value.correlation_id is None
    assert codec.frame_length(struct.pack(">i", 10)) == 10
    for bad in (-1, codec.FRAME_SIZE_MAX + 1):
        with pytest.raises(MalformedRequest):
            codec.frame_length(struct.pack(">i", bad))


def test_compact_string_longer_than_frame():
    frame = codec.encode_request(18, 3, 3, "c", {"client_software_name": "abc"})
    raw = bytearray(frame[4:])
    raw[raw.index(b"\x04abc")] = 0x7F  # compact length 126 in a short frame
    with pytest.raises(MalformedRequest) as err:
        codec.decode_request(bytes(raw))
    assert err.value.correlation_id == 3


def test_unknown_tagged_fields_are_skipped():
    frame = bytearray(codec.encode_request(18, 3, 3, "c", {"client_software_name": "n"})[4:])
    assert frame[-1] == 0
    frame[-1:] = b"\x01\x63\x02hi"  # one tagged field, tag 99, 2 bytes
    assert codec.decode_request(bytes(frame)).body["client_software_name"] == "n"


def test_errors_are_in_the_tree_with_kafka_codes():
    for cls in CODE_TO_ERROR.values():
        if issubclass(cls, KafkaCodecError):
            assert cls.kafka_code in set(ErrorCode)
