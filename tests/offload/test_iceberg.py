"""Offloaded ledgers as Iceberg tables (offload.iceberg) against a real SeaweedFS (`s3_server`) and
real catalog databases: SQLite shared with a real metadata store, and PostgreSQL (`pg_server`).

Covered: objects written by `offload.format.LedgerWriter` and registered read back through a
pyiceberg scan as the same rows pyarrow reads from the objects; a partitioned topic is one table;
re-registering is a no-op; unregistering drops exactly that ledger's file (metadata only, op
"delete"), and nothing is written inside a topic's folder; names with "." and "%" survive; two
"brokers" creating the same table at once both land their files; the cold tier's offload commits
to the table before returning, a failed commit fails the offload and the retry reuses the object,
delete and clean_orphans remove the file first; a catalog that is down, wrong S3 credentials and
a locked SQLite catalog are IcebergCatalogError within the bound, and nothing registered is lost;
expiring old snapshots deletes only the manifest lists and manifests no kept snapshot uses, never
a data file, and registering goes on as before.
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

from common.config import default_config
from common.errors import IcebergCatalogError, InvalidArgument
from metadata import open_store
from offload import keys, open_cold_storage
from offload.format import LedgerOrigin, LedgerWriter
from offload.iceberg import (
    SNAPSHOTS_EXPIRED_PER_PASS_MIN,
    SNAPSHOTS_KEPT,
    TABLE_LOCATION_SUFFIX,
    IcebergSettings,
    IcebergTables,
    catalog,
    catalog_sqlalchemy_url,
    expire_snapshots,
    table_identifier,
)
from offload.message_table import MESSAGE_COLUMNS, MESSAGE_ONLY_SCHEMA
from offload.s3 import S3Settings
from offload.tier import S3ColdStorage
from tests.ledger.conftest import run, shutdown
from tests.offload.test_tier import env, make_entries, offload_settings, write_ledger  # noqa: F401 (env: fixture)

PREFIX = "strata"
TIMEOUT_MS = 8_000
ORDER = [("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")]


@pytest.fixture(params=["sqlite", "postgresql"])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A real metadata store's database (its tables created), which the catalog shares."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/metadata.db"
    else:
        url = request.getfixturevalue("pg_server").fresh_database_url("ice")
    store = open_store(url)
    store.create("/probe", b"x")        # the metadata store works in the same database
    yield url
    store.close()


def s3_settings(srv: Any, bucket: str, secret: str | None = None) -> S3Settings:
    config = default_config(**offload_settings(srv, bucket))
    return S3Settings.from_config(config, access_key=srv.access_key, secret_key=secret or srv.secret_key)


def tables_for(srv: Any, bucket: str, url: str, *, secret: str | None = None,
               timeout_ms: int = TIMEOUT_MS) -> IcebergTables:
    config = default_config(**offload_settings(srv, bucket), offload_iceberg_timeout_ms=timeout_ms)
    settings = IcebergSettings.from_config(config, url)
    assert settings is not None
    return IcebergTables(settings, s3_settings(srv, bucket, secret))


def upload_ledger(srv: Any, bucket: str, ml_name: str, ledger_id: int, entries: int, seed: int) -> str:
    """One ledger's object, written by LedgerWriter and put where the offloader puts it."""
    sink = io.BytesIO()
    topic, partition = keys.topic_origin(ml_name)
    writer = LedgerWriter(sink, LedgerOrigin(topic, partition, ledger_id), 16 * 1024)
    for entry_id, data in enumerate(make_entries(entries, seed, payload_bytes=200)):
        writer.add(entry_id, data)
    writer.close()
    key = keys.ledger_key(PREFIX, ml_name, ledger_id)
    srv.boto3_client().put_object(Bucket=bucket, Key=key, Body=sink.getvalue())
    return key


def objects_read_by_pyarrow(srv: Any, bucket: str, object_keys: list[str]) -> pa.Table:
    fs = pafs.S3FileSystem(endpoint_override=srv.endpoint, access_key=srv.access_key, secret_key=srv.secret_key,
                           region=srv.region, scheme="http")
    table = ds.dataset([f"{bucket}/{k}" for k in object_keys], filesystem=fs, format="parquet").to_table()
    return message_rows(table)


def message_rows(table: pa.Table) -> pa.Table:
    return table.select(list(MESSAGE_COLUMNS)).cast(MESSAGE_ONLY_SCHEMA).sort_by(ORDER)


def scanned(srv: Any, bucket: str, url: str, topic: str) -> pa.Table:
    """What an outside reader gets: its own SqlCatalog over the same database, a scan to Arrow."""
    cat = catalog(s3_settings(srv, bucket), url)
    try:
        return message_rows(cat.load_table(table_identifier(topic)).scan().to_arrow())
    finally:
        cat.engine.dispose()


def test_registered_objects_scan_as_pyarrow_reads_them(s3_server, metadata_url):
    bucket = s3_server.new_bucket()
    part0, part1 = "acme/orders/persistent/paid-partition-0", "acme/orders/persistent/paid-partition-1"
    other = "acme/orders/persistent/refunds"
    layout = {101: (part0, 40), 102: (part1, 25), 103: (part0, 30), 104: (other, 10)}
    object_keys = {lid: upload_ledger(s3_server, bucket, ml, lid, n, seed=lid) for lid, (ml, n) in layout.items()}
    tables = tables_for(s3_server, bucket, metadata_url)

    async def register_all() -> list[bool]:
        return [await tables.register(ml, object_keys[lid]) for lid, (ml, _) in layout.items()]

    assert run(register_all()) == [True] * 4
    paid = [object_keys[lid] for lid in (101, 102, 103)]
    got = scanned(s3_server, bucket, metadata_url, "persistent://acme/orders/paid")
    assert got.num_rows > 95 and got.equals(objects_read_by_pyarrow(s3_server, bucket, paid))
    assert sorted(set(got.column("partition").to_pylist())) == [0, 1]     # one table, both partitions
    assert scanned(s3_server, bucket, metadata_url, "acme/orders/refunds").equals(
        objects_read_by_pyarrow(s3_server, bucket, [object_keys[104]]))
    table = tables.load_table("persistent://acme/orders/paid-partition-1")  # a partition names its topic's table
    snapshots = len(table.snapshots())

    # re-registering is a no-op: no new snapshot, the same rows
    assert run(tables.register(part0, object_keys[101])) is False
    assert len(tables.load_table("persistent://acme/orders/paid").snapshots()) == snapshots

    # unregistering drops exactly that ledger's file, without rewriting anything
    assert run(tables.unregister(object_keys[103])) is True
    assert run(tables.unregister(object_keys[103])) is False
    table = tables.load_table("persistent://acme/orders/paid")
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    summary = snapshot.summary
    assert summary.operation.value == "delete" and summary["deleted-data-files"] == "1"
    assert "added-data-files" not in summary.additional_properties
    after = scanned(s3_server, bucket, metadata_url, "persistent://acme/orders/paid")
    assert after.equals(objects_read_by_pyarrow(s3_server, bucket, [object_keys[101], object_keys[102]]))
    assert sorted({f.file.file_path for f in table.scan().plan_files()}) == sorted(
        f"s3://{bucket}/{k}" for k in (object_keys[101], object_keys[102]))

    # the table's files are next to the topic folders, none inside them
    listed = [o["Key"] for o in s3_server.boto3_client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert table.location() == f"s3://{bucket}/{PREFIX}/acme/orders/paid{TABLE_LOCATION_SUFFIX}"
    for key in listed:
        if TABLE_LOCATION_SUFFIX not in key:
            assert keys.ledger_id_of(key) is not None, key
    assert any(k.startswith(f"{PREFIX}/acme/orders/paid{TABLE_LOCATION_SUFFIX}/metadata/") for k in listed)
    assert tables.registered == 4 and tables.unregistered == 1
    tables.close()


def test_names_with_dots_and_percent_and_racing_creators(s3_server, tmp_path):
    bucket = s3_server.new_bucket()
    url = f"sqlite:///{tmp_path}/metadata.db"
    ml_b = "ac.me/eu.west/persistent/orders.v2%3Ax=1-partition-4"
    ml = "ac.me/eu.west/persistent/orders.v2%3Ax=1-partition-3"
    key_a = upload_ledger(s3_server, bucket, ml, 7, 12, seed=7)
    key_b = upload_ledger(s3_server, bucket, ml_b, 8, 9, seed=8)
    one, two = tables_for(s3_server, bucket, url), tables_for(s3_server, bucket, url)   # two "brokers"

    async def race() -> list[bool]:
        return list(await asyncio.gather(one.register(ml, key_a), two.register(ml_b, key_b)))

    assert run(race()) == [True, True]
    assert table_identifier(ml) == ("ac%2Eme", "eu%2Ewest", "orders%2Ev2%253Ax=1")
    got = scanned(s3_server, bucket, url, "persistent://ac.me/eu.west/orders.v2%3Ax=1")
    assert got.equals(objects_read_by_pyarrow(s3_server, bucket, [key_a, key_b]))
    cat = one.catalog()
    assert cat.list_tables(("ac%2Eme", "eu%2Ewest")) == [("ac%2Eme", "eu%2Ewest", "orders%2Ev2%253Ax=1")]
    one.close()
    two.close()


def test_an_empty_ledger_registers_and_unregisters(s3_server, tmp_path):
    bucket = s3_server.new_bucket()
    url = f"sqlite:///{tmp_path}/metadata.db"
    ml = "acme/orders/persistent/quiet"
    key = upload_ledger(s3_server, bucket, ml, 5, 0, seed=5)
    tables = tables_for(s3_server, bucket, url)
    assert run(tables.register(ml, key)) is True
    assert scanned(s3_server, bucket, url, ml).num_rows == 0
    assert run(tables.unregister(key)) is True
    assert [f.file.file_path for f in tables.load_table(ml).scan().plan_files()] == []
    tables.close()


def test_catalog_down_and_wrong_credentials_are_typed_and_lose_nothing(s3_server, pg_server):
    bucket = s3_server.new_bucket()
    url = pg_server.fresh_database_url("icedown")
    ml = "acme/orders/persistent/paid"
    first, second = (upload_ledger(s3_server, bucket, ml, lid, 20, seed=lid) for lid in (1, 2))
    tables = tables_for(s3_server, bucket, url, timeout_ms=6_000)
    assert run(tables.register(ml, first)) is True
    expected = objects_read_by_pyarrow(s3_server, bucket, [first])

    # S3 refuses the credentials: the table's metadata cannot be read or written
    wrong = tables_for(s3_server, bucket, url, secret="not-the-secret")
    with pytest.raises(IcebergCatalogError) as refused:
        run(wrong.register(ml, second))
    assert refused.value.retriable and refused.value.code == 704
    wrong.close()
    assert scanned(s3_server, bucket, url, ml).equals(expected)

    # the catalog database is down: bounded, typed, and the table is intact once it is back
    pg_server.stop()
    try:
        started = time.monotonic()
        with pytest.raises(IcebergCatalogError):
            run(tables.register(ml, second))
        with pytest.raises(IcebergCatalogError):
            run(tables.unregister(first))
        assert time.monotonic() - started < 2 * 6.0 + 4.0
    finally:
        pg_server.start()
    assert scanned(s3_server, bucket, url, ml).equals(expected)
    # the timed-out attempt's thread may still commit once the lock goes; this call then waits for
    # it and finds the file there (False): either way the file is in the table exactly once
    run(tables.register(ml, second))
    assert scanned(s3_server, bucket, url, ml).equals(objects_read_by_pyarrow(s3_server, bucket, [first, second]))
    tables.close()


def test_a_locked_sqlite_catalog_is_a_bounded_typed_error(s3_server, tmp_path):
    bucket = s3_server.new_bucket()
    url = f"sqlite:///{tmp_path}/metadata.db"
    ml = "acme/orders/persistent/paid"
    first, second = (upload_ledger(s3_server, bucket, ml, lid, 10, seed=lid) for lid in (1, 2))
    tables = tables_for(s3_server, bucket, url, timeout_ms=3_000)
    assert run(tables.register(ml, first)) is True
    holder = sqlite3.connect(f"{tmp_path}/metadata.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")             # another writer holds the database
    try:
        started = time.monotonic()
        with pytest.raises(IcebergCatalogError):
            run(tables.register(ml, second))
        assert time.monotonic() - started < 3.0 + 2.0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # the timed-out attempt's thread may still commit once the lock goes; this call then waits for
    # it and finds the file there (False): either way the file is in the table exactly once
    run(tables.register(ml, second))
    assert scanned(s3_server, bucket, url, ml).equals(objects_read_by_pyarrow(s3_server, bucket, [first, second]))
    tables.close()


def test_cold_tier_commits_to_the_table_before_returning(env, s3_server):  # noqa: F811 (env: fixture)
    env.start_bookies(1)
    bucket = s3_server.new_bucket()
    ml = "acme/orders/persistent/paid-partition-2"
    entries = make_entries(200, seed=11)
    config = default_config(**offload_settings(s3_server, bucket), offload_iceberg_timeout_ms=4_000)

    def tier(catalog_url: str) -> S3ColdStorage:
        storage = open_cold_storage(config, access_key=s3_server.access_key, secret_key=s3_server.secret_key,
                                    metadata_url=catalog_url)
        assert isinstance(storage, S3ColdStorage) and storage.tables is not None
        return storage

    async def body() -> None:
        store, client = await env.open(env.config())
        source = await write_ledger(client, entries)
        # the catalog cannot be reached: the object is uploaded, the offload fails (retriable)
        down = tier("postgresql://nobody@127.0.0.1:1/none")
        with pytest.raises(IcebergCatalogError):
            await down.offload(ml, source.ledger_id, source, len(entries))
        key = keys.ledger_key(PREFIX, ml, source.ledger_id)
        s3_server.boto3_client().head_object(Bucket=bucket, Key=key)
        await down.close()
        # the retry reuses the object and the table has it once offload returns
        storage = tier(env.metadata_url)
        copy = await storage.offload(ml, source.ledger_id, source, len(entries))
        assert copy.key == key and storage.tables is not None
        tables = storage.tables
        rows = tables.load_table(ml).scan().to_arrow()
        assert rows.num_rows == objects_read_by_pyarrow(s3_server, bucket, [key]).num_rows > 200
        # delete: the file leaves the table, then the object goes
        await storage.delete(copy)
        assert tables.load_table(ml).scan().to_arrow().num_rows == 0
        assert s3_server.boto3_client().list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount") == 0
        # clean_orphans: an object registered but not kept leaves the table too; table files stay
        copy = await storage.offload(ml, source.ledger_id, source, len(entries))
        assert await storage.clean_orphans(ml, set()) == [key]
        assert tables.load_table(ml).scan().to_arrow().num_rows == 0
        assert tables.unregistered == 2
        await storage.close()
        await shutdown(store, client)
    run(body())


def test_catalog_urls_and_settings() -> None:
    pg = catalog_sqlalchemy_url("postgresql://strata@db.example:5432/meta", 30.0)
    assert pg.startswith("postgresql+psycopg://strata@db.example:5432/meta?")
    assert "connect_timeout=10" in pg and "statement_timeout%3D10000" in pg
    assert catalog_sqlalchemy_url("sqlite:////var/lib/strata/metadata.db", 6.0) == \
        "sqlite:////var/lib/strata/metadata.db?timeout=2"
    for bad in ("mysql://x@y/z", "sqlite://", "not a url"):
        with pytest.raises(InvalidArgument):
            catalog_sqlalchemy_url(bad, 30.0)
    config = default_config(offload_driver="s3")
    assert IcebergSettings.from_config(config, None) is None                  # no catalog database known
    assert IcebergSettings.from_config(config.replace(offload_iceberg_enabled=False), "sqlite:////x.db") is None
    chosen = IcebergSettings.from_config(config.replace(offload_iceberg_catalog_uri="postgresql://a@b/c"),
                                         "sqlite:////x.db")
    assert chosen is not None and chosen.catalog_uri.startswith("postgresql+psycopg://a@b/c")
    storage = open_cold_storage(config)
    assert storage is not None and storage.tables is None   # no metadata URL: the tier without tables
    run(storage.close())


def test_old_snapshots_expire_and_only_their_own_metadata_files_go(s3_server, tmp_path):
    bucket = s3_server.new_bucket()
    url = f"sqlite:///{tmp_path}/metadata.db"
    ml = "acme/orders/persistent/busy"
    object_keys = [upload_ledger(s3_server, bucket, ml, lid, 6, seed=lid) for lid in range(1, 10)]
    tables = tables_for(s3_server, bucket, url)

    async def register(keys_: list[str]) -> list[bool]:
        return [await tables.register(ml, key) for key in keys_]

    assert run(register(object_keys[:8])) == [True] * 8
    table = tables.load_table(ml)
    before = table.snapshots()
    assert len(before) == 8                       # below the automatic expiry's threshold
    assert expire_snapshots(table, kept=3, batch_min=1) == 5
    table = tables.load_table(ml)
    assert [s.snapshot_id for s in table.snapshots()] == [s.snapshot_id for s in before[-3:]]
    listed = {o["Key"] for o in s3_server.boto3_client().list_objects_v2(Bucket=bucket)["Contents"]}
    location = table.location().removeprefix(f"s3://{bucket}/")
    for snapshot in before:
        manifest_list = snapshot.manifest_list.removeprefix(f"s3://{bucket}/")
        assert (manifest_list in listed) == (snapshot in before[-3:])
    for snapshot in table.snapshots():
        for manifest in snapshot.manifests(table.io):
            assert manifest.manifest_path.removeprefix(f"s3://{bucket}/") in listed
    assert all(key in listed for key in object_keys)                  # data files are never touched
    assert any(k.startswith(location) and k.endswith(".metadata.json") for k in listed)
    assert table.properties["write.metadata.delete-after-commit.enabled"] == "true"   # old ones go
    assert scanned(s3_server, bucket, url, ml).equals(objects_read_by_pyarrow(s3_server, bucket, object_keys[:8]))
    assert run(register(object_keys)) == [False] * 8 + [True]
    assert scanned(s3_server, bucket, url, ml).equals(objects_read_by_pyarrow(s3_server, bucket, object_keys))
    # registering expires by itself once SNAPSHOTS_EXPIRED_PER_PASS_MIN piled up past SNAPSHOTS_KEPT
    more = [upload_ledger(s3_server, bucket, ml, lid, 2, seed=lid) for lid in range(10, 26)]
    assert len(tables.load_table(ml).snapshots()) + len(more) == SNAPSHOTS_KEPT + SNAPSHOTS_EXPIRED_PER_PASS_MIN
    assert run(register(more)) == [True] * len(more)
    assert len(tables.load_table(ml).snapshots()) == SNAPSHOTS_KEPT
    everything = object_keys + more
    assert scanned(s3_server, bucket, url, ml).equals(objects_read_by_pyarrow(s3_server, bucket, everything))
    tables.close()


def test_a_table_made_before_the_offset_column_gains_it_and_keeps_its_files(s3_server, tmp_path):
    """A topic's table created with the schema before `offset` existed, holding an object without
    the column: the next register adds the column (new files carry it, older rows read null)."""
    import pyarrow.parquet as pq

    from offload.iceberg import TABLE_PROPERTIES, table_location
    from offload.message_table import MESSAGE_SCHEMA

    bucket = s3_server.new_bucket()
    url = f"sqlite:///{tmp_path}/metadata.db"
    ml = "acme/orders/persistent/older"
    old_schema = pa.schema([f for f in MESSAGE_SCHEMA if f.name != "offset"])
    old_key = upload_ledger(s3_server, bucket, ml, 7, 12, seed=7)        # then rewritten without the column
    body = s3_server.boto3_client().get_object(Bucket=bucket, Key=old_key)["Body"].read()
    sink = io.BytesIO()
    pq.write_table(pq.read_table(io.BytesIO(body)).drop_columns(["offset"]), sink)
    s3_server.boto3_client().put_object(Bucket=bucket, Key=old_key, Body=sink.getvalue())
    cat = catalog(s3_settings(s3_server, bucket), url)
    identifier = table_identifier(ml)
    cat.create_namespace(identifier[:2])
    location = table_location(s3_settings(s3_server, bucket), ml)
    old_table = cat.create_table(identifier, schema=old_schema, location=location, properties=TABLE_PROPERTIES)
    old_table.add_files([f"s3://{bucket}/{old_key}"])
    cat.engine.dispose()

    new_key = keys.ledger_key(PREFIX, ml, 8)
    sink = io.BytesIO()
    topic, partition = keys.topic_origin(ml)
    writer = LedgerWriter(sink, LedgerOrigin(topic, partition, 8, first_offset=500), 16 * 1024)
    for entry_id, data in enumerate(make_entries(10, 8, payload_bytes=100)):
        writer.add(entry_id, data)
    writer.close()
    s3_server.boto3_client().put_object(Bucket=bucket, Key=new_key, Body=sink.getvalue())
    tables = tables_for(s3_server, bucket, url)
    assert run(tables.register(ml, new_key)) is True
    assert "offset" in {f.name for f in tables.load_table(ml).schema().fields}
    rows = tables.load_table(ml).scan().to_arrow().sort_by(ORDER)
    by_ledger = {lid: [o for lid2, o in zip(rows.column("ledger_id").to_pylist(), rows.column("offset").to_pylist(),
                                           strict=True) if lid2 == lid] for lid in (7, 8)}
    assert by_ledger[7] and all(o is None for o in by_ledger[7])
    assert by_ledger[8][0] == 500 and by_ledger[8] == sorted(by_ledger[8]) and None not in by_ledger[8]
    assert run(tables.unregister(old_key)) is True                     # an old file still leaves
    tables.close()
