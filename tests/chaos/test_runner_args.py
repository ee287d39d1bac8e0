"""`strata chaos`'s arguments: bad usage is refused with a clear message and exit code 2, before
anything starts; a run's defaults (20 faults, a printed random seed) and durations in s/m/h."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chaos.runner import parse_args, parse_duration_s

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv, message", [
    (["--faults", "-1"], "--faults must be >= 0"),
    (["--duration", "ten minutes"], "bad duration"),
    (["--only", "broker,gremlins"], "unknown fault role or kind: gremlins"),
    (["--brokers", "0"], "--brokers and --bookies must be >= 1"),
    (["--faults", "many"], "invalid int value"),
])
def test_bad_usage_exits_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_defaults_and_durations():
    opts = parse_args(["--seed", "5"])
    assert (opts.faults, opts.duration_s, opts.seed, opts.brokers, opts.bookies) == (20, None, 5, 2, 3)
    assert opts.out == Path("chaos-5")
    timed = parse_args(["--duration", "10m", "--only", "broker,s3-stop"])
    assert (timed.faults, timed.duration_s, timed.only) == (None, 600.0, frozenset({"broker", "s3-stop"}))
    assert [parse_duration_s(t) for t in ("90", "90s", "1.5m", "2h")] == [90.0, 90.0, 90.0, 7200.0]


def test_the_command_refuses_bad_usage_before_starting_anything(tmp_path):
    result = subprocess.run([sys.executable, "-m", "cli.main", "chaos", "--faults", "-3", "--out", str(tmp_path / "x")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--faults must be >= 0" in result.stderr
    assert not (tmp_path / "x").exists()
