"""`strata admin`'s global flags wherever they are typed, the admin URL from the environment, and
pulsar-admin 3.x units (bare times are seconds, bare sizes bytes; retention values under one unit
are refused instead of silently turning retention off)."""

from __future__ import annotations

import argparse

import pytest

from cli import admin
from cli.admin.units import retention_mb, retention_minutes, size_bytes, time_seconds


@pytest.mark.parametrize("argv", [
    ["-o", "json", "-y", "topics", "delete", "t"],
    ["topics", "delete", "t", "-y", "-o", "json"],
    ["-y", "topics", "delete", "t", "--output", "json"],
    ["--output", "json", "topics", "delete", "t", "--yes"],
])
def test_output_and_yes_before_or_after_the_command(argv: list[str]) -> None:
    args = admin.parser().parse_args(argv)
    assert (args.output, args.yes) == ("json", True)


def test_defaults_are_tables_and_asking() -> None:
    args = admin.parser().parse_args(["topics", "stats", "t"])
    assert (args.output, args.yes, args.admin_url) == ("table", False, "http://127.0.0.1:8080")


def test_admin_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATA_ADMIN_URL", "http://10.0.0.7:8080")
    assert admin.parser().parse_args(["brokers", "list"]).admin_url == "http://10.0.0.7:8080"
    assert admin.parser().parse_args(["--admin-url", "http://h:1", "brokers", "list"]).admin_url == "http://h:1"


@pytest.mark.parametrize(("text", "seconds"), [("120", 120), ("30s", 30), ("10m", 600), ("3h", 10_800),
                                               ("2d", 172_800), ("1w", 604_800), ("-1", -1)])
def test_bare_times_are_seconds(text: str, seconds: int) -> None:
    assert time_seconds(text) == seconds


@pytest.mark.parametrize(("text", "size"), [("4096", 4096), ("500K", 512_000), ("10M", 10 * 1024**2),
                                            ("2G", 2 * 1024**3), ("-1", -1)])
def test_bare_sizes_are_bytes(text: str, size: int) -> None:
    assert size_bytes(text) == size


@pytest.mark.parametrize(("time", "size", "expected"), [
    ("120", "3145728", (2, 3)), ("3h", "2G", (180, 2048)), ("-1", "-1", (-1, -1)), ("0", "0", (0, 0))])
def test_retention_converts_as_pulsar_admin(time: str, size: str, expected: tuple[int, int]) -> None:
    assert (retention_minutes(time), retention_mb(size)) == expected


@pytest.mark.parametrize("text", ["4096", "1K", "1023K"])
def test_retention_size_under_a_megabyte_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="under 1 MiB"):
        retention_mb(text)


@pytest.mark.parametrize("text", ["30", "59s"])
def test_retention_time_under_a_minute_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="under a minute"):
        retention_minutes(text)
