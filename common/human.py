"""Numbers as people read them in CLI output and advice text.

What must hold: powers of 1024 with IEC units; whole bytes below 1 KiB, one decimal above.
"""

from __future__ import annotations


def human_bytes(size_bytes: float) -> str:
    """1536 → "1.5 KiB"; 100 → "100 B"; up to TiB."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
