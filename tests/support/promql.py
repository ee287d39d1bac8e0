"""PromQL helpers for the tests that check the Grafana dashboard against live exporters."""

from __future__ import annotations

import re

_NOT_METRICS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
                "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords and labels left out)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                       # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)                                  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                                 # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if expr[match.end():].lstrip().startswith("(") or match.group().lower() in _NOT_METRICS:
            continue
        names.add(match.group())
    return names
