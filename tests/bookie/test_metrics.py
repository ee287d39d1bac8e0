"""A bookie's /metrics (bookie/metrics.py): served on bookie_metrics_port by a real BookieServer,
in Prometheus text that prometheus_client's own parser reads, with BookKeeper's names; adds move
the journal's latency histograms and byte/entry counters, a GC run its runtime histogram."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from bookie.server import BookieServer
from common.net import free_port
from tests.bookie.storage_helpers import add, config, entry


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {sample.name + ("" if not sample.labels else str(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


async def _scrape_async(port: int) -> dict[str, float]:
    return await asyncio.get_running_loop().run_in_executor(None, _scrape, port)


def test_bookie_serves_metrics_that_move_with_adds_and_gc(tmp_path) -> None:
    async def scenario() -> None:
        port = free_port()
        server = BookieServer(str(tmp_path / "bookie"), config(bookie_metrics_port=port), port=0)
        await server.start()
        try:
            assert server.metrics_port == port
            before = await _scrape_async(port)
            assert before["bookie_SERVER_STATUS"] == 1 and before["bookie_ledgers_count"] == 0
            assert before["bookie_entries_written_total"] == 0
            assert before["bookie_disk_free_bytes"] > 0 and "process_resident_memory_bytes" in before
            payloads = [b"p" * 100, b"q" * 200, b"r" * 300]
            assert await add(server.storage, [entry(7, i, p) for i, p in enumerate(payloads)]) == [0, 0, 0]
            await server.gc()
            after = await _scrape_async(port)
            assert after["bookie_entries_written_total"] == 3
            assert after["bookie_WRITE_BYTES_total"] > sum(map(len, payloads))      # headers included
            adds, syncs = "bookie_journal_JOURNAL_ADD_ENTRY_count", "bookie_journal_JOURNAL_SYNC_count"
            assert after[adds] == before[adds] + 1                              # one add request
            assert after[syncs] >= before[syncs] + 1
            assert after["bookie_journal_JOURNAL_SYNC_bucket[('le', '+Inf')]"] == after[syncs]
            assert after["bookie_ledgers_count"] == 1 and after["bookie_disk_used_bytes"] > 0
            assert after["bookie_GC_LEDGER_RUNTIME_count"] == 1
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_metrics_are_off_by_default(tmp_path) -> None:
    async def scenario() -> None:
        server = BookieServer(str(tmp_path / "bookie"), config(), port=0)
        await server.start()
        try:
            assert server.metrics_port == 0
        finally:
            await server.stop()

    asyncio.run(scenario())
