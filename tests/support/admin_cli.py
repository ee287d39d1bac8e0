"""`strata admin` as scripts call it: JSON output (`-o json`) and no confirmation prompts (`-y`)."""

from __future__ import annotations

from cli import admin


def run_admin(argv: list[str]) -> int:
    """`strata admin -o json -y ARGV...`; its exit status."""
    return admin.main(["-o", "json", "-y", *argv])
