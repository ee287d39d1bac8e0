"""`Category`: one kind of finding, its count and the first few examples.

A category is either a violation (it makes the history invalid when its count is nonzero) or
informational (reported, never a failure). Examples keep the first `examples_max` found, in
the order the check found them (history order), so a rerun of the same history shows the same
ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EXAMPLES_MAX = 5


@dataclass
class Category:
    name: str
    violation: bool                 # nonzero count makes the history invalid
    doc: str                        # one line: what is counted
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    examples_max: int = EXAMPLES_MAX
    checked: bool = True            # False: the check could not run (reported, and never valid)

    def add(self, example: dict[str, Any]) -> None:
        self.count += 1
        if len(self.examples) < self.examples_max:
            self.examples.append(example)

    @property
    def failed(self) -> bool:
        return self.violation and (self.count > 0 or not self.checked)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "violation": self.violation, "checked": self.checked, "doc": self.doc,
                "examples": self.examples}
