"""A bookie's Prometheus `/metrics`, served over HTTP on `bookie_metrics_port` (0: not served).

Names are BookKeeper's where it has one (its prometheus provider), Strata's otherwise:
- `bookie_journal_JOURNAL_ADD_ENTRY` (histogram, seconds): a journal write item (one add
  request's records) from submission until fsynced; `bookie_journal_JOURNAL_SYNC` (histogram,
  seconds): one journal fsync (nothing observed with `bookie_unsafe_skip_fsync`). BookKeeper
  reports these two as summaries in milliseconds; histograms let Prometheus aggregate bookies.
- `bookie_WRITE_BYTES_total`: journal record bytes made durable; `bookie_entries_written_total`:
  entries made durable (both since the bookie started).
- `bookie_SERVER_STATUS`: 1 writable, 0 read-only (BookKeeper's). `bookie_ledgers_count`,
  `bookie_disk_used_bytes` (files of this bookie), `bookie_disk_free_bytes` (free on its file
  system, what the read-only threshold `bookie_disk_free_bytes_min` is checked against).
- Corruption (bookie/corrupt.py): `bookie_entries_to_repair` (gauge: entries found corrupt,
  not served, awaiting the auditor's repair), `bookie_corrupt_entries_found_total`,
  `bookie_corrupt_entries_repaired_total`, `bookie_corrupt_entries_overflow_total` (found while
  the set was full: left indexed, reported later).
- GC (bookie/gc.py, as run by the server): `bookie_GC_LEDGER_RUNTIME` (histogram, seconds, one
  run), `bookie_gc_reclaimed_bytes_total`, `bookie_gc_deleted_segments_total`,
  `bookie_gc_compacted_segments_total`; `bookie_periodic_failures_total` (label `job`).
- the process: `process_*`, `python_info`, `python_gc_*`.

The HTTP server (aiohttp) runs on the bookie's event loop, so a scrape reads storage state
between two steps of the loop, never in the middle of one.

What must hold: a scrape changes nothing; each bookie has its own registry (tests run several
bookies in one process).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from bookie.storage import StorageMode
from common.histogram import LatencyHistogram

if TYPE_CHECKING:
    from bookie.server import BookieServer


def _histogram(name: str, help_text: str, histogram: LatencyHistogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, help_text)
    family.add_metric([], histogram.buckets(), histogram.sum_s)
    return family


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


def _counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_text, value=value)


class BookieCollector:
    def __init__(self, server: BookieServer) -> None:
        self._server = weakref.ref(server)

    def collect(self) -> Iterator[Metric]:
        server = self._server()
        if server is None:
            return
        storage = server.storage
        journal = storage.journal
        if journal is not None:
            yield _histogram("bookie_journal_JOURNAL_ADD_ENTRY", "journal write item, submitted until fsynced, s",
                             journal.add_latency)
            yield _histogram("bookie_journal_JOURNAL_SYNC", "one journal fsync, s", journal.sync_latency)
            yield _counter("bookie_WRITE_BYTES", "journal record bytes made durable", journal.bytes_written)
        yield _counter("bookie_entries_written", "entries made durable", storage.entries_written)
        yield _gauge("bookie_SERVER_STATUS", "1: writable, 0: read-only",
                     int(storage.mode is StorageMode.WRITABLE))
        yield _gauge("bookie_ledgers_count", "ledgers stored", len(storage.index.ledgers))
        yield _gauge("bookie_disk_used_bytes", "bytes of this bookie's files", storage.disk_used_bytes())
        yield _gauge("bookie_disk_free_bytes", "free bytes on the bookie's file system", storage.disk_free_bytes())
        corrupt = storage.corrupt
        yield _gauge("bookie_entries_to_repair", "entries found corrupt, awaiting repair", len(corrupt))
        yield _counter("bookie_corrupt_entries_found", "entries found corrupt", corrupt.found_total)
        yield _counter("bookie_corrupt_entries_repaired", "corrupt entries a good copy replaced",
                       corrupt.repaired_total)
        yield _counter("bookie_corrupt_entries_overflow", "corrupt entries found while the to-repair set was full",
                       corrupt.overflow_total)
        yield from gc_families(server)


def gc_families(server: BookieServer) -> Iterator[Metric]:
    yield _histogram("bookie_GC_LEDGER_RUNTIME", "one GC run, s", server.gc_runtime)
    yield _counter("bookie_gc_reclaimed_bytes", "file bytes GC gave back (net of compaction copies)",
                   server.gc_reclaimed_bytes)
    yield _counter("bookie_gc_deleted_segments", "segment files GC deleted", server.storage.deleted_segments)
    yield _counter("bookie_gc_compacted_segments", "segment files GC compacted", server.storage.compacted_segments)
    failures = CounterMetricFamily("bookie_periodic_failures", "failed runs of a periodic job", labels=["job"])
    for job, n in sorted(server.periodic_failures.items()):
        failures.add_metric([job], n)
    yield failures


def registry_for(server: BookieServer) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BookieCollector(server))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class MetricsHttpServer:
    """`GET /metrics` on host:port, on the running event loop."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self._host = host
        self._requested_port = port
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._requested_port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
