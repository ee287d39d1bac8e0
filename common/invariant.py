"""`invariant()`: a check that stays on under `python -O`.

Plain `assert` disappears when Python runs optimised, so the ledger, cursor and storage code
states its pre- and postconditions with `invariant(cond, "what must hold", **context)` instead.
A failed invariant is a bug: it raises `InvariantViolation` and is never caught to carry on.
"""

from __future__ import annotations

from common.errors import InvariantViolation


def invariant(condition: object, message: str, **context: object) -> None:
    if not condition:
        raise InvariantViolation(f"invariant failed: {message}", **context)
