"""Kafka request and response frames <-> plain `dict` bodies, by interpreting `wire.kafka.schemas`.

Frame = int32 size (not counting itself) + header + body (KAFKA-FACTS §2). `decode_request` and
`decode_response` take the bytes AFTER the size; `encode_request` and `encode_response` return the whole
frame, size included. Request header v2 (with a tagged-field section) iff the request version is
flexible, else v1; ClientId is a classic int16-length nullable string in both. Response header v1
(tagged fields) iff flexible, except ApiVersions whose response header is always v0 (KIP-511).

Bodies are dicts keyed by the schema's field names in snake_case; nested structs are dicts, arrays
lists, uuids 16-byte `bytes`, `records` `bytes` (or None). Decoding fills every field the version does
not carry with its default, so a handler reads every key whatever the version; encoding takes missing
keys as their defaults and ignores keys the version does not carry. `records` to encode may be a
bytes-like or a list of them, written back to back (a fetch splices stored buffers without joining).

How: per (api key, version, request|response) the field list is compiled once (cached) into a struct
reader and writer: closures over the primitive readers/writers, the inline fields in order, a tag ->
field map for tagged fields, and the defaults of absent fields.

What must hold: any bytes given to a decoder either decode or raise a `KafkaCodecError` (never another
exception): `UnknownApi`, `UnsupportedVersion`, or `MalformedRequest` (truncated, garbage, negative
or oversized lengths), which carries api_key/api_version/correlation_id whenever the header was read.
Every length and count is checked against the bytes left before anything is allocated for it.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wire.kafka import primitives as p
from wire.kafka.errors import (
    ErrorCode,
    KafkaCodecError,
    MalformedRequest,
    MalformedResponse,
    UnknownApi,
    UnsupportedVersion,
)
from wire.kafka.schemas import API_NAMES, REQUESTS, RESPONSES

FRAME_SIZE_MAX = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default: the largest frame accepted
ARRAY_ELEMENTS_MAX = 1 << 20  # cap for arrays whose elements may take zero bytes (count not bounded by size)
API_VERSIONS_KEY = 18

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_I32 = p.FIXED["int32"]
_I16 = p.FIXED["int16"]
_DECODE_FAULTS = (p.Malformed, struct.error, IndexError, ValueError, OverflowError)
_ENCODE_FAULTS = (struct.error, TypeError, ValueError, AttributeError, OverflowError, KeyError)

# (api_key -> (min, max)) versions the tables hold, request side (responses hold the same).
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {key: msg["valid"] for key, msg in REQUESTS.items()}


@dataclass(slots=True)
class Request:
    """A decoded request: its header fields and its body (snake_case keys, every field present)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]


def _in(ranges: tuple[int, int] | None, version: int) -> bool:
    return ranges is not None and ranges[0] <= version <= ranges[1]


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this request/response version uses the flexible (KIP-482) encoding."""
    return _in(REQUESTS[api_key]["flexible"], api_version)


# --- compiling the tables -------------------------------------------------------------------------

@dataclass(slots=True)
class _Compiled:
    read: p.Reader
    write: p.Writer
    min_bytes: int  # fewest bytes one value takes (bounds array counts)


def _struct_default(fields: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {f["key"]: _default(f) for f in fields}


def _default(field: dict[str, Any]) -> Any:
    """A fresh default value (lists and dicts are never shared between bodies)."""
    if field["type"] == "struct":
        return None if field["default"] is None else _struct_default(field["fields"])
    value = field["default"]
    return list(value) if isinstance(value, list) else value


def _scalar(field: dict[str, Any], type_name: str, version: int, flexible: bool, nullable: bool) -> _Compiled:
    # a field-level flexibleVersions overrides the message's ("none": RequestHeader's ClientId)
    compact = flexible and ("flexible" not in field or _in(field["flexible"], version))
    return _Compiled(p.make_reader(type_name, compact, nullable), p.make_writer(type_name, compact, nullable),
                     p.min_size(type_name, compact))


def _field(field: dict[str, Any], version: int, flexible: bool) -> _Compiled:
    ftype: str = field["type"]
    if ftype == "struct":
        return _struct(field["fields"], version, flexible, nullable=_in(field["nullable"], version))
    if ftype.startswith("[]"):
        inner = ftype[2:]
        element = _struct(field["fields"], version, flexible, nullable=False) if inner == "struct" \
            else _scalar(field, inner, version, flexible, nullable=False)
        return _array(element, flexible, _in(field["nullable"], version))
    return _scalar(field, ftype, version, flexible, _in(field["nullable"], version))


def _array(element: _Compiled, compact: bool, nullable: bool) -> _Compiled:
    read_element, write_element, element_bytes = element.read, element.write, element.min_bytes

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = p.read_length(buf, pos, compact, _I32, nullable)
        if n < 0:
            return None, pos
        left = len(buf) - pos
        if (n * element_bytes > left) if element_bytes else n > ARRAY_ELEMENTS_MAX:
            raise p.Malformed(f"array of {n} elements cannot fit in the {left} bytes left")
        items = []
        for _ in range(n):
            item, pos = read_element(buf, pos)
            items.append(item)
        return items, pos

    def write(value: Any, out: list[Any]) -> None:
        if value is None:
            if not nullable:
                raise ValueError("None for an array that is not nullable in this version")
            p.write_length(-1, out, compact, _I32)
            return
        p.write_length(len(value), out, compact, _I32)
        for item in value:
            write_element(item, out)

    return _Compiled(read, write, 1 if compact else 4)


def _struct(fields: tuple[dict[str, Any], ...], version: int, flexible: bool, nullable: bool) -> _Compiled:
    inline: list[tuple[str, _Compiled, Any]] = []
    tagged: dict[int, tuple[str, _Compiled, Any]] = {}
    absent: list[dict[str, Any]] = []
    for f in fields:
        if not _in(f["versions"], version):
            absent.append(f)
        elif flexible and f.get("tag") is not None and _in(f.get("tagged"), version):
            tagged[f["tag"]] = (f["key"], _field(f, version, flexible), _default(f))
        else:
            inline.append((f["key"], _field(f, version, flexible), _default(f)))
    read = _struct_reader(inline, tagged, absent, flexible)
    write = _struct_writer(inline, tagged, flexible)
    min_bytes = sum(c.min_bytes for _, c, _ in inline) + (1 if flexible else 0)
    if nullable:
        return _nullable_struct(read, write)
    return _Compiled(read, write, min_bytes)


def _fill_absent(body: dict[str, Any], absent: list[dict[str, Any]]) -> None:
    for f in absent:
        body[f["key"]] = _default(f)


def _struct_reader(inline: list[tuple[str, _Compiled, Any]], tagged: dict[int, tuple[str, _Compiled, Any]],
                   absent: list[dict[str, Any]], flexible: bool) -> p.Reader:
    readers = [(key, c.read) for key, c, _ in inline]
    tag_readers = {tag: (key, c.read) for tag, (key, c, _) in tagged.items()}

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        body: dict[str, Any] = {}
        for key, read_field in readers:
            body[key], pos = read_field(buf, pos)
        if flexible:
            pos = _read_tagged(buf, pos, body, tag_readers)
            for key, _, default in tagged.values():
                if key not in body:
                    body[key] = _copy(default)
        if absent:
            _fill_absent(body, absent)
        return body, pos
    return read


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return list(value) if isinstance(value, list) else value


def _read_tagged(buf: bytes, pos: int, body: dict[str, Any],
                 tag_readers: dict[int, tuple[str, p.Reader]]) -> int:
    """The tagged-field section: known tags decoded into `body`, unknown ones skipped (any order)."""
    count, pos = p.read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise p.Malformed(f"tagged field {tag} of {size} bytes runs past the end")
        known = tag_readers.get(tag)
        if known is not None:
            key, read_field = known
            body[key], field_end = read_field(buf, pos)
            if field_end != end:
                raise p.Malformed(f"tagged field {tag}: {field_end - pos} bytes read of {size}")
        pos = end
    return pos


def _struct_writer(inline: list[tuple[str, _Compiled, Any]], tagged: dict[int, tuple[str, _Compiled, Any]],
                   flexible: bool) -> p.Writer:
    writers = [(key, c.write, default) for key, c, default in inline]
    tag_writers = sorted((tag, key, c.write, default) for tag, (key, c, default) in tagged.items())

    def write(value: Any, out: list[Any]) -> None:
        get = value.get
        for key, write_field, default in writers:
            write_field(get(key, default), out)
        if flexible:
            _write_tagged(get, tag_writers, out)
    return write


def _write_tagged(get: Callable[[str, Any], Any], tag_writers: list[tuple[int, str, p.Writer, Any]],
                  out: list[Any]) -> None:
    """Tagged fields in ascending tag order, each only when it differs from its default."""
    parts: list[Any] = []
    count = 0
    for tag, key, write_field, default in tag_writers:
        value = get(key, default)
        if value == default:
            continue
        field_out: list[Any] = []
        write_field(value, field_out)
        data = b"".join(field_out)
        parts += (p.uvarint(tag), p.uvarint(len(data)), data)
        count += 1
    out.append(p.uvarint(count))
    out.extend(parts)


def _nullable_struct(read_inner: p.Reader, write_inner: p.Writer) -> _Compiled:
    """A nullable struct: int8 -1 = null, 1 = present (Kafka's MessageDataGenerator)."""
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        marker = p.FIXED["int8"].unpack_from(buf, pos)[0]
        if marker < 0:
            return None, pos + 1
        return read_inner(buf, pos + 1)

    def write(value: Any, out: list[Any]) -> None:
        if value is None:
            out.append(b"\xff")
            return
        out.append(b"\x01")
        write_inner(value, out)
    return _Compiled(read, write, 1)


@functools.cache
def _compiled(api_key: int, api_version: int, response: bool) -> _Compiled:
    msg = (RESPONSES if response else REQUESTS)[api_key]
    return _struct(msg["fields"], api_version, _in(msg["flexible"], api_version), nullable=False)


# --- public API -----------------------------------------------------------------------------------

def frame_length(header4: bytes, frame_size_max: int = FRAME_SIZE_MAX) -> int:
    """The size of the frame whose 4-byte size prefix this is; a negative or too large size raises
    `MalformedRequest` before anything is buffered (STYLE §5)."""
    if len(header4) != 4:
        raise MalformedRequest(f"a size prefix is 4 bytes, got {len(header4)}")
    size: int = _SIZE.unpack(header4)[0]
    if size < 0 or size > frame_size_max:
        raise MalformedRequest(f"frame size {size} outside 0..{frame_size_max}", frame_bytes=size)
    return size


def _as_bytes(frame: bytes | bytearray | memoryview) -> bytes:
    return frame if isinstance(frame, bytes) else bytes(frame)


def _check_version(api_key: int, api_version: int, correlation_id: int) -> None:
    ids = {"api_key": api_key, "api_version": api_version, "correlation_id": correlation_id}
    if api_key not in REQUESTS:
        raise UnknownApi(f"unknown api key {api_key}", **ids)
    low, high = REQUESTS[api_key]["valid"]
    if not low <= api_version <= high:
        raise UnsupportedVersion(f"{API_NAMES[api_key]} v{api_version} outside v{low}-v{high}", **ids)


_CLIENT_ID = p.string_reader(compact=False, nullable=True)


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """A request frame (the bytes after the int32 size) -> `Request`; raises a `KafkaCodecError`."""
    buf = _as_bytes(frame)
    if len(buf) < _HEAD.size:
        raise MalformedRequest(f"request header needs {_HEAD.size} bytes, frame has {len(buf)}")
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    _check_version(api_key, api_version, correlation_id)
    try:
        client_id, pos = _CLIENT_ID(buf, _HEAD.size)
        if is_flexible(api_key, api_version):
            pos = _read_tagged(buf, pos, {}, {})
        body, _ = _compiled(api_key, api_version, False).read(buf, pos)
    except _DECODE_FAULTS as exc:
        raise MalformedRequest(f"{API_NAMES[api_key]} v{api_version}: {exc}", api_key=api_key,
                               api_version=api_version, correlation_id=correlation_id) from None
    return Request(api_key, api_version, correlation_id, client_id, body)


def _frame(parts: list[Any]) -> bytes:
    size = sum(len(x) if not isinstance(x, memoryview) else x.nbytes for x in parts)
    return b"".join([_SIZE.pack(size), *parts])


def _encode_body(api_key: int, api_version: int, response: bool, body: dict[str, Any],
                 out: list[Any]) -> None:
    try:
        _compiled(api_key, api_version, response).write(body, out)
    except _ENCODE_FAULTS as exc:
        kind = "response" if response else "request"
        raise KafkaCodecError(f"cannot encode {API_NAMES[api_key]} v{api_version} {kind}: {exc!r}",
                              api_key=api_key, api_version=api_version) from exc


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """The whole response frame (size prefix included). Missing keys take their defaults."""
    _check_version(api_key, api_version, correlation_id)
    out: list[Any] = [_I32.pack(correlation_id)]
    if api_key != API_VERSIONS_KEY and is_flexible(api_key, api_version):
        out.append(b"\x00")  # response header v1: an empty tagged-field section
    _encode_body(api_key, api_version, True, body, out)
    return _frame(out)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: dict[str, Any]) -> bytes:
    """The whole request frame (size prefix included), header v2 iff the version is flexible, else v1."""
    _check_version(api_key, api_version, correlation_id)
    out: list[Any] = [_HEAD.pack(api_key, api_version, correlation_id)]
    p.string_writer(compact=False, nullable=True)(client_id, out)
    if is_flexible(api_key, api_version):
        out.append(b"\x00")
    _encode_body(api_key, api_version, False, body, out)
    return _frame(out)


def decode_response(api_key: int, api_version: int,
                    frame: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """A response frame (the bytes after the int32 size) -> (correlation_id, body)."""
    _check_version(api_key, api_version, -1)
    buf = _as_bytes(frame)
    try:
        correlation_id = _I32.unpack_from(buf, 0)[0]
    except struct.error:
        raise MalformedResponse("response shorter than its header", api_key=api_key,
                                api_version=api_version) from None
    try:
        pos = 4
        if api_key != API_VERSIONS_KEY and is_flexible(api_key, api_version):
            pos = _read_tagged(buf, pos, {}, {})
        body, _ = _compiled(api_key, api_version, True).read(buf, pos)
    except _DECODE_FAULTS as exc:
        raise MalformedResponse(f"{API_NAMES[api_key]} v{api_version} response: {exc}", api_key=api_key,
                                api_version=api_version, correlation_id=correlation_id) from None
    return correlation_id, body


def api_versions_error_response(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request newer than ours (KIP-511): a v0 body with UNSUPPORTED_VERSION
    and ApiVersions' own version range, so the client retries with a version we speak."""
    low, high = SUPPORTED_VERSIONS[API_VERSIONS_KEY]
    body = {"error_code": int(ErrorCode.UNSUPPORTED_VERSION),
            "api_keys": [{"api_key": API_VERSIONS_KEY, "min_version": low, "max_version": high}]}
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)
