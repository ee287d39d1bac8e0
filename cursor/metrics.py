"""Process-wide cursor counters the broker's /metrics endpoint reads (plain module globals).

They only ever go up; a scraper computes rates. Names follow Prometheus' `_total` convention.
"""

CURSOR_STATE_TOO_LARGE_TOTAL = 0   # measurements (persists) that found the state over cursor_state_bytes_max
CURSOR_ACKS_REFUSED_TOTAL = 0      # acks refused because they would add ack holes to a state at the limit
CURSOR_PERSISTS_TOTAL = 0          # successful cursor writes to the metadata store
CURSOR_PERSIST_FAILURES_TOTAL = 0  # background persists that failed (any StrataError, a lost CAS too)
CURSOR_PERSIST_CONFLICTS_TOTAL = 0  # saves that lost compare-and-set (re-read, maybe written again)
CURSOR_FENCED_TOTAL = 0            # cursors that found another owner's token and stopped persisting


def snapshot() -> dict[str, int]:
    """The counters by metric name, for an exporter."""
    return {
        "strata_cursor_state_too_large_total": CURSOR_STATE_TOO_LARGE_TOTAL,
        "strata_cursor_acks_refused_total": CURSOR_ACKS_REFUSED_TOTAL,
        "strata_cursor_persists_total": CURSOR_PERSISTS_TOTAL,
        "strata_cursor_persist_failures_total": CURSOR_PERSIST_FAILURES_TOTAL,
        "strata_cursor_persist_conflicts_total": CURSOR_PERSIST_CONFLICTS_TOTAL,
        "strata_cursor_fenced_total": CURSOR_FENCED_TOTAL,
    }
