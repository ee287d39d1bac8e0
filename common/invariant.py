"""`invariant()`: a check that stays on under `python -O`.

Plain `assert` disappears when Python runs optimised, so the ledger, cursor and storage code
states its pre- and postconditions with `invariant(cond, "what must hold", **context)` instead.
`present(value, "why it is set", **context)` is the same check for "is not None" that also gives
the value back, so the type checker knows it is set from there on.
A failed invariant is a bug: it raises `InvariantViolation` and is never caught to carry on.
"""

from __future__ import annotations

from typing import TypeVar

from common.errors import InvariantViolation

T = TypeVar("T")


def invariant(condition: object, message: str, **context: object) -> None:
    if not condition:
        raise InvariantViolation(f"invariant failed: {message}", **context)


def present(value: T | None, message: str, **context: object) -> T:
    """`value`, which must not be None (an `invariant` on it)."""
    if value is None:
        raise InvariantViolation(f"invariant failed: {message}", **context)
    return value
