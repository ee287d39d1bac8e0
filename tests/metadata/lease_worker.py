"""A store owner run as its own OS process by test_lease.py, so the test can freeze it (SIGSTOP).

    python lease_worker.py URL LEASE_MS

Opens a store with lease LEASE_MS, creates the ephemeral key /owned/bundle and writes
/fenced = "worker-1", prints one JSON line `{"session": id}`, then answers one command per line
on stdin with one JSON line on stdout:
    put PATH VALUE   {"ok": version} or {"error": "LeaseLost" | "SessionExpired" | ...}
    stop-keeper      stop the store's keeper threads (so nothing but the write path looks at the
                     lease), then {"ok": true}
    state            {"valid": lease_valid(), "expired": session_expired}
End of stdin ends the worker.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from common.config import default_config
from common.errors import StrataError
from metadata import open_store


def answer(store, line: str) -> dict:
    words = line.split()
    if words[0] == "put":
        try:
            return {"ok": store.put(words[1], words[2].encode())}
        except StrataError as exc:
            return {"error": type(exc).__name__}
    if words[0] == "stop-keeper":
        store._keeper.stop()
        return {"ok": True}
    if words[0] == "state":
        return {"valid": store.lease_valid(), "expired": store.session_expired}
    return {"error": f"unknown command {words[0]!r}"}


def main(url: str, lease_ms: int) -> None:
    store = open_store(url, config=default_config(metadata_session_lease_ms=lease_ms,
                                                  metadata_op_timeout_ms=5_000))
    store.create("/owned/bundle", b"worker", ephemeral=True)
    store.put("/fenced", b"worker-1")
    print(json.dumps({"session": store.session_id}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(store, line)), flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
