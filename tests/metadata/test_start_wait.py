"""A starting broker or bookie waits (bounded) for a metadata store that is briefly down.

Found by `strata chaos`: a broker restarted while PostgreSQL was down (killed, restarting) exited
at once with "metadata database unavailable during create schema", so a short outage of the
metadata store turned into a dead broker. `open_store_waiting` (what the broker and the bookie's
registration open the store with) keeps trying for `metadata_start_wait_ms`; with 0 it fails at
once, as before.
"""

from __future__ import annotations

import threading
import time

import pytest

from common.config import default_config
from common.errors import MetadataUnavailable
from launch.postgres import PostgresServer
from metadata import open_store_waiting

OUTAGE_S = 2.0


def test_the_start_waits_out_a_short_outage_and_gives_up_after_the_bound():
    server = PostgresServer()
    try:
        server.start()
        url = server.url()
        server.stop()
        quick = default_config(metadata_start_wait_ms=0, metadata_op_timeout_ms=1_000)
        with pytest.raises(MetadataUnavailable):
            open_store_waiting(url, config=quick)
        restart = threading.Timer(OUTAGE_S, server.start)
        restart.start()
        started = time.monotonic()
        patient = default_config(metadata_start_wait_ms=60_000, metadata_op_timeout_ms=1_000)
        store = open_store_waiting(url, config=patient)
        try:
            assert time.monotonic() - started >= OUTAGE_S * 0.9   # it did wait for the restart
            store.create("/started", b"ok")
            assert store.get("/started").value == b"ok"
        finally:
            store.close()
        restart.join()
    finally:
        server.cleanup()
