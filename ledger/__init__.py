"""ledger: the replicated ledger client and the managed ledger built on it.

Ledger client: `client.LedgerClient` (create/open/recover/delete), `handle` (ReadHandle,
WriteHandle: striping, Qa acks, LAC, ensemble change), `recovery` (fence, recovery reads, close),
`ledger_metadata` (the CAS-only record and its state machine), `striping` (quorum arithmetic),
`pending` (sans-IO add pipeline), `placement` (bookie choice), `ledger_store` (metadata I/O, the
shared bookie client pool).

Managed ledger: `managed_ledger.ManagedLedger` (append/read/trim/close, LedgerView), `ml_open`
(takeover, crash recovery, index loading), `ml_metadata` (ledger list record, name encoding),
`view` (LedgerView answers from the indexes), `entry_index`, `cache`, `rollover`, `trim`.
"""
