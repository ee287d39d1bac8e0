"""A worker run as its own OS process by test_processes.py (python proc_worker.py MODE ...).

Each mode opens a store, prints `ready`, waits for the go-file (so all workers start racing at
once), does its work and prints one JSON line with the result.
    cas  URL GO N        N compare-and-set attempts on /race; result: versions this worker won
    ids  URL GO N        N next_id("race") draws; result: the ids drawn
    hold URL GO LEASE_MS K   create K ephemeral keys under /held, print the JSON, then sleep forever
    open URL GO          print `ready`, wait for the go-file, then open the store (all workers at
                         once, on a database nobody created yet) and draw one id
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from common.config import default_config
from common.errors import BadVersion
from metadata import open_store


def wait_go(path: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.005)


def main(argv: list[str]) -> None:
    mode, url, go = argv[0], argv[1], argv[2]
    lease_ms = int(argv[3]) if mode == "hold" else 10_000
    if mode == "open":
        print("ready", flush=True)
        wait_go(go)
    store = open_store(url, config=default_config(metadata_session_lease_ms=lease_ms,
                                                  metadata_op_timeout_ms=20_000))
    if mode != "open":
        print("ready", flush=True)
        wait_go(go)
    if mode == "open":
        print(json.dumps([store.next_id("race")]), flush=True)
    elif mode == "cas":
        won = []
        for _ in range(int(argv[3])):
            current = store.get("/race")
            try:
                won.append(store.put("/race", b"x", expected_version=current.version))
            except BadVersion:
                pass
        print(json.dumps(won), flush=True)
    elif mode == "ids":
        print(json.dumps([store.next_id("race") for _ in range(int(argv[3]))]), flush=True)
    elif mode == "hold":
        paths = [f"/held/{os.getpid()}-{i}" for i in range(int(argv[4]))]
        for path in paths:
            store.create(path, b"", ephemeral=True)
        print(json.dumps(paths), flush=True)
        time.sleep(3600)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
