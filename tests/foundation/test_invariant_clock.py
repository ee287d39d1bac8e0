import subprocess
import sys

import pytest

from common.clock import ManualClock, SystemClock
from common.errors import InvariantViolation
from common.invariant import invariant


def test_invariant_raises_with_context():
    invariant(True, "fine")
    with pytest.raises(InvariantViolation) as info:
        invariant(1 > 2, "one above two", a=1)
    assert "one above two" in str(info.value) and "a=1" in str(info.value)


def test_invariant_stays_on_under_python_O():
    code = ("from common.invariant import invariant\n"
            "try:\n    invariant(False, 'x')\nexcept Exception as e:\n    print(type(e).__name__)\n")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "InvariantViolation"


def test_manual_clock_moves_only_when_told():
    clock = ManualClock(start_wall_ms=1000)
    assert clock.wall_ms() == 1000 and clock.monotonic_s() == 0
    clock.advance_s(2.5)
    assert clock.wall_ms() == 3500 and clock.monotonic_s() == 2.5
    with pytest.raises(ValueError):
        clock.advance_s(-1)


def test_system_clock_is_monotonic():
    c = SystemClock()
    a = c.monotonic_s()
    assert c.monotonic_s() >= a and c.wall_ms() > 1_600_000_000_000
