"""Numbers and times as people read them in CLI output, advice text and admin JSON.

What must hold: powers of 1024 with IEC units; whole bytes below 1 KiB, one decimal above.
"""

from __future__ import annotations

import datetime


def human_bytes(size_bytes: float) -> str:
    """1536 → "1.5 KiB"; 100 → "100 B"; up to TiB."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def iso_ms(ms: int) -> str:
    """Pulsar's admin timestamp format, e.g. 2021-01-22T21:12:14.868+00:00."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds")
