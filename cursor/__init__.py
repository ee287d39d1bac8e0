"""cursor: managed cursors (acks, mark-delete, persistence). managed_cursor and ack_state may run
compiled (scripts/compile_hot.py); STRATA_PURE_PYTHON=1 loads their .py instead (common.compiled)."""

from common.compiled import load_source_if_pure

load_source_if_pure(__path__)
