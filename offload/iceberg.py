"""Offloaded topics as Apache Iceberg tables: every offloaded ledger's object is a data file of
its topic's table, in a pyiceberg `SqlCatalog` kept in the cluster's own metadata database.

    tables = IcebergTables(IcebergSettings.from_config(config, metadata_url), s3_settings)
    await tables.register(ml_name, key)      # after the upload, before the ColdCopy is recorded
    await tables.unregister(key)             # before the object is deleted (retention)
    table = tables.load_table("persistent://t/ns/x")    # blocking: readers, tests

The catalog (`catalog(...)`, usable by any pyiceberg reader) is a SqlCatalog named
`CATALOG_NAME` whose tables (`iceberg_tables`, `iceberg_namespace_properties`) live in the
metadata store's database: `sqlite:////abs/metadata.db` embedded, `postgresql://user@host/db` in a
cluster (mapped to `postgresql+psycopg://`: Strata ships psycopg 3). The FileIO is pyarrow's S3
over the offload bucket (`offload_s3_*`; credentials as given, else the AWS chain).

Names. One table per topic; a partitioned topic is one table over all its partitions (the
`partition` column tells them apart). The identifier is `(tenant, namespace, topic)`: a
two-level namespace and the table. SqlCatalog joins namespace levels with "." and splits
string identifiers on ".", while our names may hold "." (`[A-Za-z0-9_.:=%-]`), so each part is
escaped: "%" -> "%25", then "." -> "%2E" (`persistent://acme/eu.west/orders.v2` is
`acme.eu%2Ewest.orders%2Ev2`, i.e. ("acme", "eu%2Ewest", "orders%2Ev2")). The table's location
(its metadata/ files) is `s3://{bucket}/{prefix}/{tenant}/{namespace}/{topic}!iceberg`, next to
the topic's object folder and never inside it (a topic folder holds only ledger objects, and
`clean_orphans` deletes anything else there); "!" is not allowed in names, so no topic's folder
is ever a table location. Object keys are used as they are: a name with "%" keeps it in the
data file's path (pyiceberg's FileIO does not decode paths; engines that URL-decode s3 paths
would not find such files).

The table schema is the whole `offload.message_table.MESSAGE_SCHEMA` (add_files refuses a file
with a column the table lacks), every column optional, timestamps `timestamptz` (us). A table
made before a column joined the schema (`offset`, the Kafka offset) gains it on the next
register (`union_by_name`: a new optional column at the end, the name mapping updated with it);
its older files lack it and read as null there. Files are
added with `add_files` (metadata only: the data is never rewritten) and removed by a metadata-only
delete of `ledger_id == N` (each object holds one ledger, so its statistics say min == max and
the whole file goes; a delete that would need a rewrite is refused). Manifests are merged
(`commit.manifest-merge.enabled`) so a long-lived topic does not pile up one manifest per ledger.
Every commit is a snapshot; past `SNAPSHOTS_KEPT` + `SNAPSHOTS_EXPIRED_PER_PASS_MIN` the older
ones are expired (with the manifest lists and manifests only they used, never a data file), and
old metadata.json files are deleted by pyiceberg past the newest 16, so a commit's cost stays
flat (pyiceberg copies the whole metadata many times per commit: at 150 snapshots a register
took 1.2 s, at <= 20 about 0.2 s). Time travel thus reaches `SNAPSHOTS_KEPT` commits back; a
snapshot from before a removal still lists that ledger's object, which the cold tier has deleted.

What must hold: a table references only complete objects (register runs after the upload) and
no deleted one (unregister runs first); register and unregister are idempotent and safe to race
with another broker (namespace/table creation tolerates a winner; commits retry on conflict);
every pyiceberg, SQLAlchemy or pyarrow failure leaves this module as `IcebergCatalogError`;
blocking calls run in this object's small thread pool, never on the event loop, and each call is
bounded by `timeout_s`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from common import retry
from common.config import Config
from common.errors import IcebergCatalogError, InvalidArgument, StrataError
from common.redact import redact_url
from common.topic_names import parse_topic
from offload import keys
from offload.s3 import S3Settings

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)
T = TypeVar("T")

CATALOG_NAME = "strata"
TABLE_LOCATION_SUFFIX = "!iceberg"      # "!" is never in a name: no topic folder is a table location
CATALOG_THREADS = 2
LOCK_STRIPES = 16                        # per-table commit locks within this process
SNAPSHOTS_KEPT = 10                      # time travel reaches this many commits back
SNAPSHOTS_EXPIRED_PER_PASS_MIN = 10      # snapshots past SNAPSHOTS_KEPT before an expiry commit
TABLE_PROPERTIES = {
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",   # old metadata.json files go ...
    "write.metadata.previous-versions-max": "16",           # ... past the newest 16
    "strata.managed": "true",            # tells people the cold tier adds and removes its files
}
_ALREADY_REFERENCED = "already referenced"   # pyiceberg's add_files ValueError for a known file
_CATALOG_RETRY_ATTEMPTS = 3
_CATALOG_RETRY = retry.Retry("offload.iceberg_commit", retry_on=IcebergCatalogError,
                             attempts_max=_CATALOG_RETRY_ATTEMPTS,
                             wait=retry.exponential(0.2, 2.0), log_level=logging.INFO)


@dataclass(frozen=True)
class IcebergSettings:
    catalog_uri: str          # SQLAlchemy URL of the catalog database (already mapped, with timeouts)
    timeout_s: float          # bound on one register / unregister, retries included

    @classmethod
    def from_config(cls, config: Config, metadata_url: str | None) -> IcebergSettings | None:
        """The settings, or None when Iceberg tables are off or no catalog URI is known (neither
        `offload_iceberg_catalog_uri` nor the metadata store's URL)."""
        uri = config.offload_iceberg_catalog_uri or metadata_url or ""
        if not config.offload_iceberg_enabled or not uri:
            return None
        timeout_s = config.offload_iceberg_timeout_ms / 1000
        return cls(catalog_sqlalchemy_url(uri, timeout_s), timeout_s)


def catalog_sqlalchemy_url(url: str, timeout_s: float) -> str:
    """A metadata URL (`sqlite:////abs/x.db`, `postgresql://...`) as the SQLAlchemy URL SqlCatalog
    takes: psycopg 3 for PostgreSQL, and bounds on connecting, locks and statements (a share of
    `timeout_s`, which covers every attempt of a call). Bounds already in the URL are kept."""
    attempt_s = max(1.0, timeout_s / _CATALOG_RETRY_ATTEMPTS)
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise InvalidArgument("Iceberg catalog URI is not a database URL", uri=redact_url(url)) from exc
    backend = parsed.get_backend_name()
    query = dict(parsed.query)
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise InvalidArgument("an SQLite Iceberg catalog needs a file: sqlite:////abs/path.db", uri=redact_url(url))
        query.setdefault("timeout", f"{attempt_s:g}")
        parsed = parsed.set(drivername="sqlite", database=os.path.abspath(parsed.database), query=query)
    elif backend in ("postgresql", "postgres"):
        timeout_ms = int(attempt_s * 1000)
        query.setdefault("connect_timeout", str(max(2, int(attempt_s))))   # libpq's smallest useful value is 2
        query.setdefault("options", f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}")
        query.setdefault("application_name", "strata-iceberg")
        parsed = parsed.set(drivername="postgresql+psycopg", query=query)
    else:
        raise InvalidArgument("Iceberg catalog URI must be sqlite:///... or postgresql://...", uri=redact_url(url))
    return parsed.render_as_string(hide_password=False)


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(".", "%2E")


def _topic_parts(topic: str) -> tuple[str, str, str]:
    """(tenant, namespace, partitioned topic's local name) of a full or short topic name, or of a
    managed ledger name `tenant/ns/persistent/x`; a partition gives its partitioned topic's."""
    parts = topic.split("/")
    if "://" not in topic and len(parts) == 4 and parts[2] == "persistent":
        ml = keys.parse_ml_name(topic)
        return ml.tenant, ml.namespace, ml.base
    name = parse_topic(topic).base
    return name.tenant, name.namespace, name.local


def table_identifier(topic: str) -> tuple[str, str, str]:
    """(tenant, namespace, table), each escaped (see the module docstring), of a topic or managed
    ledger name; a partition's is its partitioned topic's."""
    tenant, namespace, base = _topic_parts(topic)
    return _escape(tenant), _escape(namespace), _escape(base)


def table_location(settings: S3Settings, topic: str) -> str:
    """`s3://bucket/{prefix}/{tenant}/{namespace}/{topic}!iceberg`: next to the topic's folder."""
    tenant, namespace, base = _topic_parts(topic)
    folder = f"{tenant}/{namespace}/{base}{TABLE_LOCATION_SUFFIX}"
    root = f"s3://{settings.bucket}/{settings.prefix}" if settings.prefix else f"s3://{settings.bucket}"
    return f"{root}/{folder}"


def _ml_name_of_key(settings: S3Settings, key: str) -> str:
    """The managed ledger name an object key belongs to (offload.keys' layout, read backwards)."""
    prefix = f"{settings.prefix}/" if settings.prefix else ""
    parts = key[len(prefix):].split("/") if key.startswith(prefix) else []
    if len(parts) == 4 and keys.ledger_id_of(parts[3]) is not None:
        return f"{parts[0]}/{parts[1]}/persistent/{parts[2]}"
    if len(parts) == 5 and keys.ledger_id_of(parts[4]) is not None:
        return f"{parts[0]}/{parts[1]}/persistent/{parts[2]}-{parts[3]}"
    raise InvalidArgument("not an offloaded ledger's object key", key=key, prefix=settings.prefix)


def catalog_properties(settings: S3Settings, catalog_uri: str, timeout_s: float) -> dict[str, str]:
    """SqlCatalog properties: the catalog database and the pyarrow S3 FileIO of the bucket."""
    props = {"uri": catalog_uri, "pool_pre_ping": "true", "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
             "s3.region": settings.region, "s3.connect-timeout": f"{settings.connect_timeout_s:g}",
             "s3.request-timeout": f"{min(settings.read_timeout_s, timeout_s):g}"}
    if settings.endpoint:
        props.update({"s3.endpoint": settings.endpoint, "s3.path-style-access": "true",
                      "s3.force-virtual-addressing": "false"})
    if settings.access_key and settings.secret_key:
        props.update({"s3.access-key-id": settings.access_key, "s3.secret-access-key": settings.secret_key})
    return props


def catalog(settings: S3Settings, catalog_uri: str, timeout_s: float = 30.0) -> SqlCatalog:
    """The cluster's Iceberg catalog (blocking: connects, and creates its tables if missing).
    `catalog_uri` is a metadata URL or `IcebergSettings.catalog_uri`."""
    from pyiceberg.catalog.sql import SqlCatalog
    uri = catalog_sqlalchemy_url(catalog_uri, timeout_s)
    with _translated("open catalog", None):
        return SqlCatalog(CATALOG_NAME, **catalog_properties(settings, uri, timeout_s))


class _QuietStatistics(logging.Filter):
    """pyiceberg warns once per column without Parquet statistics on every add_files; our objects
    keep statistics only where they prune (offload.format), so those lines are noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyArrow statistics missing")


logging.getLogger("pyiceberg.io.pyarrow").addFilter(_QuietStatistics())


class IcebergTables:
    """The Iceberg side of the cold tier: one table per topic, files added and removed as
    ledgers are offloaded and deleted. The catalog is opened on first use."""

    def __init__(self, settings: IcebergSettings, s3: S3Settings) -> None:
        self.settings = settings
        self.s3 = s3
        self._catalog: SqlCatalog | None = None
        self._catalog_lock = threading.Lock()   # the pool's threads open the catalog once
        self._pool = ThreadPoolExecutor(max_workers=CATALOG_THREADS, thread_name_prefix="offload-iceberg")
        self._locks = [asyncio.Lock() for _ in range(LOCK_STRIPES)]
        # held by the worker thread itself: a call that timed out leaves its thread running, and the
        # next call of the same table must not commit beside it (pyiceberg retries a conflicting
        # append without checking for the file again: the same data file would be added twice)
        self._thread_locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self.registered = 0               # files added by this process
        self.unregistered = 0             # files removed by this process

    # --- async API (the cold tier) --------------------------------------------------------------

    async def register(self, ml_name: str, key: str) -> bool:
        """Add the object `key` of managed ledger `ml_name` to its topic's table (creating the
        namespace and table on first use). True if added, False if the table had it already."""
        identifier = table_identifier(ml_name)
        added = await self._run(identifier, "register", functools.partial(self._register, ml_name, key))
        self.registered += int(added)
        return added

    async def unregister(self, key: str) -> bool:
        """Remove the object `key` from its topic's table. True if a file was removed, False if
        the table (or the file in it) was not there."""
        ml_name = _ml_name_of_key(self.s3, key)
        identifier = table_identifier(ml_name)
        removed = await self._run(identifier, "unregister", functools.partial(self._unregister, ml_name, key))
        self.unregistered += int(removed)
        return removed

    async def _run(self, identifier: tuple[str, ...], op: str, fn: Callable[[], T]) -> T:
        stripe = zlib.crc32(".".join(identifier).encode()) % LOCK_STRIPES
        lock, thread_lock = self._locks[stripe], self._thread_locks[stripe]
        loop = asyncio.get_running_loop()

        def serialized() -> T:
            with thread_lock:
                return _CATALOG_RETRY.call(fn, about=".".join(identifier))

        try:
            async with asyncio.timeout(self.settings.timeout_s):
                async with lock:
                    return await loop.run_in_executor(self._pool, serialized)
        except TimeoutError:
            raise IcebergCatalogError("Iceberg catalog call timed out", op=op, table=".".join(identifier),
                                      timeout_s=self.settings.timeout_s) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._catalog is not None:
            self._catalog.engine.dispose()
            self._catalog = None

    # --- blocking API (worker threads, readers, tests) ------------------------------------------

    def catalog(self) -> SqlCatalog:
        """The catalog, opened on first use (connects; creates the catalog's tables if missing)."""
        with self._catalog_lock:
            if self._catalog is None:
                self._catalog = catalog(self.s3, self.settings.catalog_uri, self.settings.timeout_s)
            return self._catalog

    def load_table(self, topic: str) -> Table:
        """The topic's table (IcebergCatalogError if there is none, or the catalog fails)."""
        identifier = table_identifier(topic)
        with _translated("load table", identifier):
            return self.catalog().load_table(identifier)

    def _table(self, ml_name: str, *, create: bool) -> Table | None:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

        from offload.message_table import MESSAGE_SCHEMA  # pyarrow: loaded with the first table, not the broker
        cat = self.catalog()
        identifier = table_identifier(ml_name)
        try:
            return _with_current_schema(cat.load_table(identifier))
        except NoSuchTableError:
            if not create:
                return None
        try:
            cat.create_namespace(identifier[:2])
        except NamespaceAlreadyExistsError:
            pass                          # another broker (or partition) was first
        try:
            return cat.create_table(identifier, schema=MESSAGE_SCHEMA, location=table_location(self.s3, ml_name),
                                    properties=TABLE_PROPERTIES)
        except TableAlreadyExistsError:
            return cat.load_table(identifier)

    def _register(self, ml_name: str, key: str) -> bool:
        identifier = table_identifier(ml_name)
        path = f"s3://{self.s3.bucket}/{key}"
        with _translated("register", identifier):
            table = self._table(ml_name, create=True)
            assert table is not None
            try:
                table.add_files([path])
            except ValueError as exc:
                if _ALREADY_REFERENCED not in str(exc):
                    raise
                return False
            log.info("Iceberg table %s: added %s", ".".join(identifier), path)
        _expire_quietly(table, identifier)
        return True

    def _unregister(self, ml_name: str, key: str) -> bool:
        from pyiceberg.expressions.parser import parse
        identifier = table_identifier(ml_name)
        ledger_id = keys.ledger_id_of(key)
        if ledger_id is None:
            raise InvalidArgument("not an offloaded ledger's object key", key=key)
        with _translated("unregister", identifier):
            table = self._table(ml_name, create=False)
            if table is None:
                return False
            tx = table.transaction()
            delete = tx.update_snapshot().delete()
            delete.delete_by_predicate(parse(f"ledger_id == {ledger_id}"))
            if delete.rewrites_needed:
                raise IcebergCatalogError("a file of the table holds more than one ledger; not rewriting it",
                                          table=".".join(identifier), ledger_id=ledger_id)
            if not delete.files_affected:
                return False
            delete.commit()
            tx.commit_transaction()
            log.info("Iceberg table %s: removed ledger %d (%s)", ".".join(identifier), ledger_id, key)
        _expire_quietly(table, identifier)
        return True


def expire_snapshots(table: Table, kept: int = SNAPSHOTS_KEPT,
                     batch_min: int = SNAPSHOTS_EXPIRED_PER_PASS_MIN) -> int:
    """Expire all but the newest `kept` snapshots once at least `batch_min` more have piled up,
    and delete the manifest lists and manifests only they referenced (never a data file: those
    are the cold tier's objects). The number of snapshots expired.

    Each register/unregister is a commit, i.e. a snapshot, and pyiceberg copies the whole table
    metadata (every snapshot) several times per commit: at 200 snapshots a register took 1.2 s
    instead of 0.2 s. Keeping the count bounded keeps a commit's cost flat."""
    snapshots = sorted(table.metadata.snapshots, key=lambda snap: (snap.timestamp_ms, snap.sequence_number or 0))
    current = table.current_snapshot()
    if len(snapshots) < kept + batch_min:
        return 0
    expired = [snap for snap in snapshots[:len(snapshots) - kept]
               if current is None or snap.snapshot_id != current.snapshot_id]
    table.maintenance.expire_snapshots().by_ids([snap.snapshot_id for snap in expired]).commit()
    still_used = {manifest.manifest_path for snap in table.metadata.snapshots
                  for manifest in snap.manifests(table.io)}
    gone: set[str] = set()
    for snap in expired:
        gone.update(m.manifest_path for m in snap.manifests(table.io) if m.manifest_path not in still_used)
        gone.add(snap.manifest_list)
    for path in gone:
        table.io.delete(path)
    return len(expired)


def _with_current_schema(table: Table) -> Table:
    """`table`, given the MESSAGE_SCHEMA columns it lacks (a table made before they existed):
    add_files refuses a file with a column its table does not have."""
    from offload.message_table import MESSAGE_SCHEMA
    have = {field.name for field in table.schema().fields}
    if all(name in have for name in MESSAGE_SCHEMA.names):
        return table
    with table.update_schema() as update:
        update.union_by_name(MESSAGE_SCHEMA)
    log.info("Iceberg table %s: added column(s) %s", table.name(),
             [name for name in MESSAGE_SCHEMA.names if name not in have])
    return table


def _expire_quietly(table: Table, identifier: tuple[str, ...]) -> None:
    """expire_snapshots after a commit that already succeeded: a failure is only logged (the next
    commit tries again; files it left are merely unreferenced)."""
    try:
        expired = expire_snapshots(table)
    except Exception as exc:
        log.warning("Iceberg table %s: expiring old snapshots failed (next commit retries): %s",
                    ".".join(identifier), _describe(exc))
        return
    if expired:
        log.info("Iceberg table %s: expired %d old snapshots", ".".join(identifier), expired)


@contextmanager
def _translated(op: str, identifier: tuple[str, ...] | None) -> Iterator[None]:
    """Any foreign failure inside becomes IcebergCatalogError (StrataErrors pass unchanged)."""
    try:
        yield
    except StrataError:
        raise
    except Exception as exc:
        raise IcebergCatalogError(f"Iceberg catalog {op} failed: {_describe(exc)}", op=op,
                                  table=".".join(identifier) if identifier else None,
                                  cause=type(exc).__name__) from exc


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
