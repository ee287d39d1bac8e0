"""pulsar-admin 3.x units for `strata admin` options.

- Times (`--time`, `--ttl`, `--expire-time`, `--lag`, ...): a bare number is SECONDS; or a number
  with a unit `s m h d w y` (`30s`, `10m`, `3h`, `2d`, `1w`, `1y`).
- Sizes (`--size`, `--size-threshold`, `--limit`): a bare number is BYTES; or `K M G T` (powers of
  1024: `500K`, `10M`, `2G`, `1T`).
- `-1` means unlimited / unset where pulsar-admin takes it; other negatives are refused unless the
  option allows them.
Retention is stored in minutes and MB (Pulsar's RetentionPolicies): `retention_minutes` and
`retention_mb` convert as pulsar-admin does (seconds // 60, bytes // MiB; -1 stays -1), except
that a value under one unit (a bare `--size 4096`: 4096 bytes; `--time 30`: 30 seconds) is refused
with a reason instead of silently becoming 0, which would turn retention off.
"""

from __future__ import annotations

import argparse

_TIME_UNITS_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800, "y": 31_536_000}
_SIZE_UNITS_BYTES = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
MIB = 1024 * 1024


def _number(text: str, units: dict[str, int], what: str, hint: str) -> int:
    value = text.strip().lower()
    if value.lstrip("-").isdigit():
        return int(value)
    if len(value) < 2 or value[-1] not in units or not value[:-1].isdigit():
        raise argparse.ArgumentTypeError(f"bad {what} {text!r}: use {hint}")
    return int(value[:-1]) * units[value[-1]]


def time_seconds(text: str) -> int:
    """A relative time in seconds: bare seconds (may be negative) or 30s/10m/3h/2d/1w/1y."""
    return _number(text, _TIME_UNITS_S, "time", "seconds or 30s/10m/3h/2d/1w/1y")


def size_bytes(text: str) -> int:
    """A size in bytes: bare bytes (may be negative) or 500K/10M/2G/1T."""
    return _number(text, _SIZE_UNITS_BYTES, "size", "bytes or 500K/10M/2G/1T")


def positive_time_seconds(text: str) -> int:
    seconds = time_seconds(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"bad time {text!r}: must not be negative")
    return seconds


def retention_minutes(text: str) -> int:
    """`set-retention --time` in minutes (-1 unlimited): seconds // 60, as pulsar-admin."""
    seconds = time_seconds(text)
    if seconds < -1:
        raise argparse.ArgumentTypeError(f"bad retention time {text!r}: -1 (unlimited) or >= 0")
    if 0 < seconds < 60:
        raise argparse.ArgumentTypeError(f"retention time {text!r} is under a minute, and retention is kept in "
                                         "minutes: it would be 0 (none); use 0, -1 (unlimited) or at least 1m")
    return -1 if seconds == -1 else seconds // 60


def retention_mb(text: str) -> int:
    """`set-retention --size` in MB (-1 unlimited): bytes // MiB, as pulsar-admin."""
    size = size_bytes(text)
    if size < -1:
        raise argparse.ArgumentTypeError(f"bad retention size {text!r}: -1 (unlimited) or >= 0")
    if 0 < size < MIB:
        raise argparse.ArgumentTypeError(f"retention size {text!r} is under 1 MiB, and retention is kept in MB: "
                                         "it would be 0 (none); use 0, -1 (unlimited) or at least 1M")
    return -1 if size == -1 else size // MIB
