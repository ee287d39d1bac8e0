"""`strata admin` offload commands: pulsar-admin's units and its offload-threshold arithmetic.

The threshold vectors are pulsar-admin's own (TestCmdTopics): ledgers (0, 1000 B), (1, 2000 B),
(2, 3000 B), oldest first.
"""

from __future__ import annotations

import argparse

import pytest

from cli import admin
from cli.admin.offload import first_ledger_within_threshold
from cli.admin.units import size_bytes, time_seconds

LEDGERS = [(0, 1000), (1, 2000), (2, 3000)]


@pytest.mark.parametrize(("threshold", "expected"), [
    (2**63 - 1, None), (0, 2), (1000, 2), (5000, 1), (5999, 1), (6000, None)])
def test_pulsar_admin_threshold_vectors(threshold: int, expected: int | None) -> None:
    assert first_ledger_within_threshold(LEDGERS, threshold) == expected


def test_no_ledgers_offload_nothing() -> None:
    assert first_ledger_within_threshold([], 0) is None


@pytest.mark.parametrize(("text", "value"), [
    ("100", 100), ("-1", -1), ("0", 0), ("10K", 10 * 1024), ("10k", 10 * 1024), ("10M", 10 * 1024**2),
    ("1G", 1024**3), ("2T", 2 * 1024**4)])
def test_sizes_are_bytes_with_binary_units(text: str, value: int) -> None:
    assert size_bytes(text) == value


@pytest.mark.parametrize(("text", "value"), [
    ("30", 30), ("-1", -1), ("30s", 30), ("10m", 600), ("1h", 3600), ("1d", 86400), ("2w", 1_209_600),
    ("1y", 31_536_000)])
def test_times_are_seconds_with_units(text: str, value: int) -> None:
    assert time_seconds(text) == value


@pytest.mark.parametrize("text", ["", "M", "10X", "1.5M", "ten", "10MB", "-10M"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        size_bytes(text)


@pytest.mark.parametrize("text", ["", "h", "10q", "1.5h", "-1h"])
def test_bad_times_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        time_seconds(text)


def _parse(*argv: str) -> argparse.Namespace:
    return admin.parser().parse_args(list(argv))


def test_command_lines_parse_as_pulsar_admin_s() -> None:
    args = _parse("topics", "offload", "-s", "10M", "t1")
    assert (args.action, args.size_threshold, args.topic) == ("offload", 10 * 1024**2, "t1")
    args = _parse("topics", "offload", "--size-threshold", "100", "t1")
    assert args.size_threshold == 100
    args = _parse("topics", "offload-status", "-w", "t1")
    assert args.wait_complete and args.timeout > 0
    assert not _parse("topics", "offload-status", "t1").wait_complete
    args = _parse("namespaces", "set-offload-threshold", "-s", "1G", "-t", "1h", "public/default")
    assert (args.size, args.time) == (1024**3, 3600)
    assert _parse("namespaces", "set-offload-threshold", "--size", "0", "public/default").time == -1
    assert _parse("namespaces", "set-offload-deletion-lag", "-l", "10m", "public/default").lag == 600
    for action in ("get-offload-threshold", "get-offload-deletion-lag", "clear-offload-deletion-lag"):
        assert _parse("namespaces", action, "public/default").namespace == "public/default"


@pytest.mark.parametrize("argv", [
    ["topics", "offload", "t1"],                                        # -s is required
    ["topics", "offload", "-s", "10Q", "t1"],
    ["namespaces", "set-offload-threshold", "public/default"],          # -s is required
    ["namespaces", "set-offload-deletion-lag", "-l", "soon", "public/default"],
])
def test_bad_command_lines_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        admin.main(argv)
    assert exc.value.code == 2
