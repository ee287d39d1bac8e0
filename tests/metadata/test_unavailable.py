"""A database that is down or locked gives a retriable MetadataUnavailable within the bound,
never a hang; and the store works again once the database is back."""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from common.config import default_config
from common.errors import MetadataUnavailable
from common.net import free_port
from metadata import open_store
from tests.support.postgres import TestPostgres, started_or_fail

OP_TIMEOUT_MS = 2_000
BOUND_S = OP_TIMEOUT_MS / 1000 * 2 + 3  # connect + statement, plus slack for a loaded 2-core machine


def timed_unavailable(call) -> float:
    started = time.monotonic()
    with pytest.raises(MetadataUnavailable) as info:
        call()
    assert info.value.retriable
    return time.monotonic() - started


def test_postgres_stopped_then_back():
    config = default_config(metadata_op_timeout_ms=OP_TIMEOUT_MS, metadata_session_lease_ms=5_000)
    server = started_or_fail()
    try:
        store = open_store(server.url(), config=config)
        store.put("/k", b"v")
        server.stop()
        for call in (lambda: store.get("/k"), lambda: store.put("/k", b"w"), lambda: store.next_id("n"),
                     lambda: store.children("/")):
            assert timed_unavailable(call) < BOUND_S
        server.start()
        deadline = time.monotonic() + 10
        while True:  # the first call after a restart may still meet a dead pooled connection
            try:
                assert store.put("/k", b"back", expected_version=1) == 2
                break
            except MetadataUnavailable:
                assert time.monotonic() < deadline, "store did not recover after the server came back"
                time.sleep(0.1)
        assert store.get("/k").value == b"back"
        store.close()
    finally:
        server.cleanup()


def server_pids(server: TestPostgres) -> list[int]:
    with open(os.path.join(server.data_dir, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    return [postmaster] + children_of(postmaster)


def children_of(parent: int) -> list[int]:
    """Direct children, read from /proc (no procps needed on a minimal machine)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        # the command name may hold spaces and parentheses: fields start after the last ')'
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry))
    return found


def test_postgres_hung_server_does_not_hang_us(pg_server):
    """A frozen server (SIGSTOP: it accepts TCP but never answers) must not block a call."""
    config = default_config(metadata_op_timeout_ms=1_000, metadata_session_lease_ms=60_000)
    store = open_store(pg_server.fresh_database_url("hung"), config=config)
    pids = server_pids(pg_server)
    try:
        store.put("/k", b"v")
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            # bounded, not instant: op timeout 1 s (+ the 2 s connect bound for a new connection),
            # with slack for a loaded 2-core CI machine; a hang would be unbounded
            assert timed_unavailable(lambda: store.put("/k", b"w")) < 1.0 + 4.0
            assert timed_unavailable(lambda: store.get("/k")) < 1.0 + 2.0 + 4.0
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert store.get("/k").value in (b"v", b"w")
                break
            except MetadataUnavailable:
                assert time.monotonic() < deadline, "store did not recover after the server resumed"
                time.sleep(0.1)
    finally:
        store.close()


def test_postgres_closed_port():
    url = f"postgresql://strata@127.0.0.1:{free_port()}/nothing"
    config = default_config(metadata_op_timeout_ms=OP_TIMEOUT_MS)
    assert timed_unavailable(lambda: open_store(url, config=config)) < BOUND_S


def test_sqlite_locked_past_the_bound(tmp_path):
    config = default_config(metadata_op_timeout_ms=500)
    path = tmp_path / "meta.db"
    store = open_store(f"sqlite:///{path}", config=config)
    try:
        store.put("/k", b"v")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        try:
            assert timed_unavailable(lambda: store.put("/k", b"w")) < 0.5 + 3.0
            assert store.get("/k").value == b"v"  # reads are not blocked by a writer (WAL)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.put("/k", b"w", expected_version=1) == 2
    finally:
        store.close()
