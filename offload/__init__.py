"""The cold tier: closed ledgers offloaded to S3 as Parquet, and read back from there.

    storage = open_cold_storage(config)      # None when offload_driver is ""
    if storage is not None:
        await storage.check()                # ColdTierBucketMissing / ColdTierAccessDenied / ColdTierUnavailable

`S3ColdStorage` (offload.tier) implements `ledger.cold.ColdStorage`; the broker hands it to the
managed ledgers and never imports boto3 or pyarrow itself. Credentials: boto3's usual chain
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, an instance role) unless given here.

Iceberg (`offload.iceberg`): with `offload_iceberg_enabled` (the default) and a catalog database
known (`offload_iceberg_catalog_uri`, else the `metadata_url` the broker passes), every offloaded
ledger's object is also a data file of its topic's Iceberg table; without a catalog URI the
tier works as before, with no tables. Turning tables off later leaves them as they are: objects
deleted from then on stay listed in them (readers of the table would miss those files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.config import Config

if TYPE_CHECKING:
    from offload.tier import S3ColdStorage


def open_cold_storage(config: Config, *, access_key: str | None = None, secret_key: str | None = None,
                      metadata_url: str | None = None) -> S3ColdStorage | None:
    """The configured cold tier, or None when `offload_driver` is empty. Opening does no I/O;
    call `await storage.check()` at start-up for a clear error about the bucket or credentials.
    `metadata_url`: the metadata store's URL, the Iceberg catalog's database unless
    `offload_iceberg_catalog_uri` names another."""
    if not config.offload_driver:
        return None
    # boto3, pyarrow and pyiceberg load only when a cold tier is configured
    from offload.iceberg import IcebergSettings, IcebergTables
    from offload.s3 import S3Settings
    from offload.tier import S3ColdStorage
    settings = S3Settings.from_config(config, access_key=access_key, secret_key=secret_key)
    iceberg = IcebergSettings.from_config(config, metadata_url)
    return S3ColdStorage(settings, tables=IcebergTables(iceberg, settings) if iceberg is not None else None)
