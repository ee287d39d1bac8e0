"""The cold tier: closed ledgers offloaded to S3 as Parquet, and read back from there.

    storage = open_cold_storage(config)      # None when offload_driver is ""
    if storage is not None:
        await storage.check()                # ColdTierBucketMissing / ColdTierAccessDenied / ColdTierUnavailable

`S3ColdStorage` (offload.tier) implements `ledger.cold.ColdStorage`; the broker hands it to the
managed ledgers and never imports boto3 or pyarrow itself. Credentials: boto3's usual chain
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, an instance role) unless given here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.config import Config

if TYPE_CHECKING:
    from offload.tier import S3ColdStorage


def open_cold_storage(config: Config, *, access_key: str | None = None,
                      secret_key: str | None = None) -> S3ColdStorage | None:
    """The configured cold tier, or None when `offload_driver` is empty. Opening does no I/O;
    call `await storage.check()` at start-up for a clear error about the bucket or credentials."""
    if not config.offload_driver:
        return None
    from offload.s3 import S3Settings  # boto3 and pyarrow load only when a cold tier is configured
    from offload.tier import S3ColdStorage
    return S3ColdStorage(S3Settings.from_config(config, access_key=access_key, secret_key=secret_key))
