"""Kafka's field types as readers and writers over bytes (KAFKA-FACTS §2).

A reader is `read(buf, pos) -> (value, new_pos)` over `bytes`; a writer is `write(value, out)` that
appends bytes-like parts to the list `out` (joined once per frame). `make_reader`/`make_writer` return
the ones for a type name as the schema tables spell it (`int32`, `string`, ...), in classic or compact
(flexible) encoding and nullable or not; struct and array composition lives in `wire.kafka.codec`.

Encodings: intN big-endian; unsigned varint = LEB128 (at most 5 bytes here: lengths and counts are
32-bit); classic string = int16 length, classic bytes/records/array = int32 length, -1 = null; compact
= uvarint(length + 1), 0 = null. UUID = 16 raw bytes (kept as `bytes`).

What must hold: a reader checks every length against the bytes left BEFORE slicing or allocating, and
raises `Malformed` (a ValueError the codec turns into its typed errors) on a negative length, a null
where the version does not allow one, a length past the end, or invalid UTF-8.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from common.varint import encode_varint

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[Any, list[Any]], None]

FIXED: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "float64": struct.Struct(">d"),
}
_I16 = FIXED["int16"]
_I32 = FIXED["int32"]
UUID_BYTES = 16


class Malformed(ValueError):
    """Bytes that do not decode as the schema says; the codec re-raises it as a typed error."""


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 of at most 5 bytes (a 32-bit length, count or tag)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise Malformed("unsigned varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    """Unsigned LEB128 of a non-negative int."""
    return encode_varint(value) if value >= 0 else _negative(value)


def _negative(value: int) -> bytes:
    raise Malformed(f"unsigned varint of a negative value {value}")




def read_length(buf: bytes, pos: int, compact: bool, classic: struct.Struct, nullable: bool) -> tuple[int, int]:
    """A length or count: -1 means null (only if nullable); checked against nothing else here."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n = classic.unpack_from(buf, pos)[0]
        pos += classic.size
    if n < 0 and (n != -1 or not nullable):
        raise Malformed(f"invalid length {n}")
    return n, pos


def _check_end(buf: bytes, pos: int, n: int) -> int:
    end = pos + n
    if end > len(buf):
        raise Malformed(f"length {n} runs past the end of the frame ({len(buf) - pos} bytes left)")
    return end


def string_reader(compact: bool, nullable: bool) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, compact, _I16, nullable)
        if n < 0:
            return None, pos
        end = _check_end(buf, pos, n)
        try:
            return buf[pos:end].decode(), end
        except UnicodeDecodeError as exc:
            raise Malformed("string is not UTF-8") from exc
    return read


def bytes_reader(compact: bool, nullable: bool) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, compact, _I32, nullable)
        if n < 0:
            return None, pos
        end = _check_end(buf, pos, n)
        return buf[pos:end], end
    return read


def fixed_reader(name: str) -> Reader:
    st = FIXED[name]
    size = st.size
    unpack = st.unpack_from

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size
    return read


def read_bool(buf: bytes, pos: int) -> tuple[Any, int]:
    return buf[pos] != 0, pos + 1


def read_uuid(buf: bytes, pos: int) -> tuple[Any, int]:
    end = _check_end(buf, pos, UUID_BYTES)
    return buf[pos:end], end


def make_reader(type_name: str, compact: bool, nullable: bool) -> Reader:
    """Reader of a scalar type (`bytes` and `records` read alike: as `bytes`)."""
    if type_name in FIXED:
        return fixed_reader(type_name)
    if type_name == "bool":
        return read_bool
    if type_name == "uuid":
        return read_uuid
    if type_name == "string":
        return string_reader(compact, nullable)
    if type_name in ("bytes", "records"):
        return bytes_reader(compact, nullable)
    raise KeyError(f"unknown field type {type_name!r}")


def write_length(n: int, out: list[Any], compact: bool, classic: struct.Struct) -> None:
    """A length or count; n = -1 writes null."""
    out.append(uvarint(n + 1) if compact else classic.pack(n))


def _null(out: list[Any], compact: bool, classic: struct.Struct, nullable: bool) -> None:
    if not nullable:
        raise ValueError("None for a field that is not nullable in this version")
    write_length(-1, out, compact, classic)


def string_writer(compact: bool, nullable: bool) -> Writer:
    def write(value: Any, out: list[Any]) -> None:
        if value is None:
            _null(out, compact, _I16, nullable)
            return
        data = value.encode()
        write_length(len(data), out, compact, _I16)
        out.append(data)
    return write


def _nbytes(part: Any) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def bytes_writer(compact: bool, nullable: bool) -> Writer:
    """bytes/records: a bytes-like value, or (records) a list of them written back to back."""
    def write(value: Any, out: list[Any]) -> None:
        if value is None:
            _null(out, compact, _I32, nullable)
            return
        if isinstance(value, list | tuple):
            write_length(sum(_nbytes(p) for p in value), out, compact, _I32)
            out.extend(value)
            return
        write_length(_nbytes(value), out, compact, _I32)
        out.append(value)
    return write


def fixed_writer(name: str) -> Writer:
    pack = FIXED[name].pack

    def write(value: Any, out: list[Any]) -> None:
        out.append(pack(value))
    return write


def write_bool(value: Any, out: list[Any]) -> None:
    out.append(b"\x01" if value else b"\x00")


def write_uuid(value: Any, out: list[Any]) -> None:
    if _nbytes(value) != UUID_BYTES:
        raise ValueError(f"a UUID is {UUID_BYTES} bytes")
    out.append(value)


def make_writer(type_name: str, compact: bool, nullable: bool) -> Writer:
    if type_name in FIXED:
        return fixed_writer(type_name)
    if type_name == "bool":
        return write_bool
    if type_name == "uuid":
        return write_uuid
    if type_name == "string":
        return string_writer(compact, nullable)
    if type_name in ("bytes", "records"):
        return bytes_writer(compact, nullable)
    raise KeyError(f"unknown field type {type_name!r}")


def min_size(type_name: str, compact: bool) -> int:
    """Fewest bytes a value of this scalar type takes (bounds array counts before allocating)."""
    if type_name in FIXED:
        return FIXED[type_name].size
    if type_name == "bool":
        return 1
    if type_name == "uuid":
        return UUID_BYTES
    if compact:
        return 1
    return 2 if type_name == "string" else 4
