"""`S3ColdStorage`: the cold tier over S3, as the managed ledger sees it (ledger.cold.ColdStorage).

    storage = S3ColdStorage(S3Settings.from_config(config))
    await storage.check()                    # typed error if the bucket or the credentials are wrong
    copy = await storage.offload(ml_name, ledger_id, read_handle, entries, progress)
    entries = await storage.read(copy, first, last)

It puts together the pieces of `offload/`: `s3.S3Bucket` (the one boto3 client, its thread pool
and the error translation), `uploader.offload_ledger` (streaming multipart upload), and
`cold_reader.ColdReader` (ranged reads, read-ahead, caches). Encoding and decoding run in two
small pools of their own (`CODEC_THREADS` each), so a long offload never delays a consumer's
decode and neither runs on the event loop.

With `tables` (offload.iceberg.IcebergTables), the cold tier keeps the topics' Iceberg tables:
`offload` adds the object to its topic's table after the upload completes and before the
ColdCopy is returned (so the managed ledger records a cold copy only once the table has it; a
failed catalog commit fails the offload, which is retried and reuses the object); `delete` and
`clean_orphans` remove the file from the table before deleting the object, so a table never
references a deleted object (a failed removal keeps the object for the next try).

pyarrow (and numpy under it, about 45 MB of a broker's RSS) loads with the first offload or
cold read, not with the tier: `offload.uploader` and `offload.cold_reader` are imported where
first used, and the reader is made on first use. A broker with a cold tier configured and
nothing offloaded yet stays small (tests/foundation/test_lazy_imports.py checks it).

What must hold: the ColdStorage contract (ledger/cold.py); `clean_orphans` touches only objects
and uploads directly under the managed ledger's own folder (offload.keys).
"""

from __future__ import annotations

import logging
from collections.abc import Set
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from common.clock import Clock, SystemClock
from ledger.cold import ColdCopy, ColdStorage, LedgerOffsets, OffloadProgress
from ledger.handle import ReadHandle
from offload import keys
from offload.iceberg import IcebergTables
from offload.s3 import S3Bucket, S3Settings

if TYPE_CHECKING:   # both import pyarrow: loaded for real on first use
    from offload.cold_reader import ColdReader, ReaderStats

log = logging.getLogger(__name__)

CODEC_THREADS = 2     # encode threads, and decode threads: the machine's cores, not more


class S3ColdStorage:
    def __init__(self, settings: S3Settings, *, clock: Clock | None = None,
                 tables: IcebergTables | None = None) -> None:
        self.settings = settings
        self.tables = tables
        self.bucket = S3Bucket(settings)
        self._clock = clock or SystemClock()
        self._encode_pool = ThreadPoolExecutor(max_workers=CODEC_THREADS, thread_name_prefix="offload-encode")
        self._decode_pool = ThreadPoolExecutor(max_workers=CODEC_THREADS, thread_name_prefix="offload-decode")
        self._cold_reader: ColdReader | None = None   # made on the first cold read (it needs pyarrow)

    @property
    def _reader(self) -> ColdReader:
        if self._cold_reader is None:
            from offload.cold_reader import ColdReader
            self._cold_reader = ColdReader(self.bucket, self._decode_pool)
        return self._cold_reader

    @property
    def read_stats(self) -> ReaderStats:
        """Counters of the cold reads (fetches, cache hits, read-ahead, bytes fetched)."""
        return self._reader.stats

    async def check(self) -> None:
        """Raise ColdTierBucketMissing / ColdTierAccessDenied / ColdTierUnavailable unless the
        bucket is there and these credentials can write and delete in it (the broker's start-up check)."""
        await self.bucket.check_access()

    async def offload(self, ml_name: str, ledger_id: int, source: ReadHandle, entries: int,
                      progress: OffloadProgress | None = None, offsets: LedgerOffsets | None = None) -> ColdCopy:
        from offload.uploader import offload_ledger
        copy = await offload_ledger(self.bucket, self._encode_pool, self._clock, ml_name, ledger_id, source,
                                    entries, progress, offsets)
        if self.tables is not None:
            await self.tables.register(ml_name, copy.key)
        return copy

    async def read(self, copy: ColdCopy, first: int, last: int) -> list[tuple[int, bytes]]:
        return await self._reader.read(copy, first, last)

    async def delete(self, copy: ColdCopy) -> None:
        self._forget(copy.key)
        if self.tables is not None:
            await self.tables.unregister(copy.key)
        await self.bucket.delete(copy.key)

    async def clean_orphans(self, ml_name: str, kept: Set[int]) -> list[str]:
        """Delete the objects and abort the incomplete uploads of this managed ledger's folder
        whose ledger id is not in `kept`; the keys removed (an object and an upload of the same
        key count once). The caller passes every ledger it still knows, offloading ones included."""
        folder = keys.topic_prefix(self.settings.prefix, ml_name)
        removed: list[str] = []
        for key in await self.bucket.list_keys(folder):
            ledger_id = keys.ledger_id_of(key)
            if ledger_id is not None and ledger_id not in kept:
                self._forget(key)
                if self.tables is not None:
                    await self.tables.unregister(key)
                await self.bucket.delete(key)
                removed.append(key)
        for key, upload_id in await self.bucket.list_multipart(folder):
            ledger_id = keys.ledger_id_of(key)
            if "/" not in key[len(folder):] and ledger_id is not None and ledger_id not in kept:
                await self.bucket.abort_multipart(key, upload_id)
                if key not in removed:
                    removed.append(key)
        if removed:
            log.info("removed %d orphan objects/uploads of %s: %s", len(removed), ml_name, removed)
        return removed

    def _forget(self, key: str) -> None:
        if self._cold_reader is not None:
            self._cold_reader.forget(key)

    async def close(self) -> None:
        if self._cold_reader is not None:
            await self._cold_reader.close()
        if self.tables is not None:
            self.tables.close()
        self._encode_pool.shutdown(wait=False, cancel_futures=True)
        self._decode_pool.shutdown(wait=False, cancel_futures=True)
        self.bucket.close()


def _implements_cold_storage(storage: S3ColdStorage) -> ColdStorage:
    """Never called: mypy checks here that S3ColdStorage keeps the ColdStorage protocol."""
    return storage
