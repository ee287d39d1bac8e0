"""When a managed ledger rolls its current ledger over to a new one.

Pulsar's rule: roll once the ledger holds `managed_ledger_rollover_entries` entries or
`managed_ledger_rollover_bytes` bytes, or is `managed_ledger_rollover_age_ms` old (and not
empty) — but never before `managed_ledger_rollover_min_age_ms`, which holds back all three
triggers. A pure function of the ledger's counters, so it is tested without a ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.config import Config


@dataclass(frozen=True)
class RolloverPolicy:
    entries_max: int
    bytes_max: int
    age_ms_max: int
    age_ms_min: int

    @classmethod
    def from_config(cls, config: Config) -> RolloverPolicy:
        return cls(config.managed_ledger_rollover_entries, config.managed_ledger_rollover_bytes,
                   config.managed_ledger_rollover_age_ms, config.managed_ledger_rollover_min_age_ms)

    def should_roll(self, entries: int, size_bytes: int, age_ms: int) -> bool:
        """Whether a ledger with these counters (entries assigned so far) must be rolled."""
        if entries == 0 or age_ms < self.age_ms_min:
            return False
        return entries >= self.entries_max or size_bytes >= self.bytes_max or age_ms >= self.age_ms_max
