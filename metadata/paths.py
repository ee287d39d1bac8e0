"""Path and argument rules of the metadata store, checked before any SQL runs.

A key path starts with `/`, has no empty segment and no trailing `/`, and each segment uses only
`[A-Za-z0-9_.:=@+%-]` (and is not `.` or `..`). The root `/` is not a key, but it is a valid
prefix for `children()`, `list_prefix()` and `watch()`. A path is at most `PATH_CHARS_MAX`
characters, so an index entry stays bounded.

Parents are implicit (as in Pulsar's metadata store): `/a/b/c` may exist without `/a/b`, and
`children("/a")` is then `["b"]`.

What must hold: every function here either returns a normalised value or raises a typed error
(`InvalidPath`, `InvalidArgument`, `ValueTooLarge`); nothing invalid reaches the database.
"""

from __future__ import annotations

import re

from common.errors import InvalidArgument, InvalidPath, ValueTooLarge

PATH_CHARS_MAX = 1024
NAME_CHARS_MAX = 256  # a next_id() sequence name

_SEGMENT = re.compile(r"[A-Za-z0-9_.:=@+%-]+")
_NAME = re.compile(r"[A-Za-z0-9_.:=@+%/-]+")


def check_path(path: object) -> str:
    """`path` if it is a valid key path, else InvalidPath."""
    if not isinstance(path, str):
        raise InvalidPath("a path must be a str", path=path)
    if len(path) > PATH_CHARS_MAX:
        raise InvalidPath("path too long", length=len(path), max=PATH_CHARS_MAX)
    if not path.startswith("/") or path == "/":
        raise InvalidPath("a key path starts with / and names a key", path=path)
    for segment in path[1:].split("/"):
        if not segment:
            raise InvalidPath("empty segment or trailing /", path=path)
        if segment in (".", "..") or not _SEGMENT.fullmatch(segment):
            raise InvalidPath("bad segment (allowed: A-Za-z0-9_.:=@+%-)", path=path, segment=segment)
    return path


def check_prefix(prefix: object) -> str:
    """A valid key path or the root `/`, else InvalidPath."""
    if prefix == "/":
        return "/"
    return check_path(prefix)


def descendant_bounds(prefix: str) -> tuple[str, str]:
    """(low, high) with every strict descendant `d` of `prefix` in low < d < high (byte order).

    `/` sorts just below `0`, and no allowed character sorts between them, so the range is
    exactly the subtree. The database must compare paths bytewise (collation "C")."""
    base = "" if prefix == "/" else prefix
    return base + "/", base + "0"


def is_under(path: str, prefix: str) -> bool:
    """True if `path` is `prefix` or below it."""
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def child_name(prefix: str, descendant: str) -> str:
    """The first segment of `descendant` below `prefix`."""
    rest = descendant[1:] if prefix == "/" else descendant[len(prefix) + 1:]
    return rest.split("/", 1)[0]


def check_value(value: object, value_bytes_max: int) -> bytes:
    """The value as bytes; InvalidArgument if not bytes-like, ValueTooLarge past the limit."""
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise InvalidArgument("a metadata value must be bytes", type=type(value).__name__)
    if len(value) > value_bytes_max:
        raise ValueTooLarge("value too large", size=len(value), max=value_bytes_max)
    return value


def check_expected_version(expected_version: object) -> int | None:
    """None (no check), -1 (the key must not exist) or a version >= 1; else InvalidArgument."""
    if expected_version is None:
        return None
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise InvalidArgument("expected_version must be an int", value=expected_version)
    if expected_version == -1 or expected_version >= 1:
        return expected_version
    raise InvalidArgument("expected_version must be -1 or >= 1", value=expected_version)


def check_id_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > NAME_CHARS_MAX or not _NAME.fullmatch(name):
        raise InvalidArgument("a sequence name is 1-256 of [A-Za-z0-9_.:=@+%/-]", name=name)
    return name
