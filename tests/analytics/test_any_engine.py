"""Any engine reads an offloaded topic (issue 13 item 6): a real standalone with a real SeaweedFS
(the session's `s3_server`), the official client, and five readers that never go through a broker.

One standalone for the module. A few thousand messages (keys, properties, event times; three
producers batching up to 5 messages, with compression) go to one topic whose ledgers roll every
100 entries;
a restart closes the last ledger, and the admin REST offload moves every closed ledger to S3 and
registers it in the topic's Iceberg table (offload.iceberg, catalog in the standalone's SQLite
metadata database). Then the topic is read:
- with pyarrow.dataset over the topic's S3 folder;
- with DuckDB over that pyarrow dataset (DuckDB's httpfs extension is not installed here);
- with Polars' own S3 reader (`scan_parquet("s3://.../*.parquet", storage_options=...)`);
- with pyiceberg: a SqlCatalog over the metadata database, table scan to Arrow;
- with the Spark source `spark.read.format("strata")` (its own test: the source is newer).

What must hold: every reader gives the same message rows (`MESSAGE_COLUMNS`, sorted by
ledger_id, entry_id, batch_index), and those are exactly what was produced: ids (the
message_id bytes deserialize to the ids the producers got), payloads, keys, properties, event
times and producer names. The Iceberg table holds one data file per offloaded ledger, each the
ledger's object, and its location is outside the topic's folder. On topics of their own: a
partitioned topic is one table over both partition folders; retention trimming offloaded
ledgers removes their files from the table (then the objects go). A `strata standalone` with its
embedded SeaweedFS registers its offloaded topics the same way (its own test and standalone).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulsar
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from offload.message_table import MESSAGE_COLUMNS, MESSAGE_ONLY_SCHEMA
from tests.acceptance.conftest import make_client
from tests.support.namespaces import ensure_namespace
from tests.support.offload_checks import (
    Admin,
    S3Access,
    Sent,
    assert_same_messages,
    http,
    id_of,
    in_id_order,
    produce_corpus,
)
from tests.support.seaweed import TestSeaweed
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

MESSAGES = 3_000
SEED = 1313
NS = f"public/any-engine-{os.getpid()}"
TOPIC = f"persistent://{NS}/events"
PREFIX = f"engines-{os.getpid()}"
OFFLOAD_TIMEOUT_S = 180.0
ORDER = [("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")]
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MILLISECOND = datetime.timedelta(milliseconds=1)
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "100",
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200",
       "STRATA_RETENTION_TIME_MINUTES": "-1", "STRATA_RETENTION_SIZE_MB": "-1"}


@dataclass
class World:
    sa: StandaloneProcess
    s3: S3Access
    corpus: list[Sent]
    closed: list[int] = field(default_factory=list)
    status: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def world(s3_server: TestSeaweed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    bucket = "any-engine"
    s3 = S3Access.of(s3_server, bucket, PREFIX)
    env = {**s3_server.standalone_env(bucket, PREFIX), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("engines") / "data", env=env) as sa:
        ensure_namespace(sa.admin_url, NS)
        client = make_client(sa.service_url)
        corpus = in_id_order(produce_corpus(client, TOPIC, MESSAGES, SEED, chunk=250, batch_messages_max=5))
        client.close()
        sa.restart()                      # closes the last ledger: the whole corpus is offloadable
        client = make_client(sa.service_url)
        client.create_reader(TOPIC, pulsar.MessageId.earliest).close()   # load the topic again
        client.close()
        w = World(sa, s3, corpus)
        admin = Admin(sa.admin_url)
        ledgers = admin.ledgers(TOPIC)
        w.closed = [int(x["ledgerId"]) for x in ledgers[:-1] if x["entries"] > 0]
        status, body = admin.offload(TOPIC, int(ledgers[-1]["ledgerId"]))
        assert status == 204, (status, body)
        w.status = admin.wait_offload_finished(TOPIC, OFFLOAD_TIMEOUT_S)
        yield w


def message_rows(table: pa.Table) -> pa.Table:
    """The message columns in MESSAGE_ONLY_SCHEMA's types, in topic order (engines differ in
    string/binary widths, time zones and how a map comes out)."""
    columns = []
    for name in MESSAGE_COLUMNS:
        column = table.column(name)
        target = MESSAGE_ONLY_SCHEMA.field(name).type
        if pa.types.is_map(target) and not pa.types.is_map(column.type):
            column = _as_map(column, target)      # Polars has no map type: list<struct<key, value>>
        columns.append(column.cast(target))
    return pa.table(columns, schema=MESSAGE_ONLY_SCHEMA).sort_by(ORDER)


def _as_map(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    chunks = []
    for chunk in column.chunks:
        chunk = chunk.cast(pa.large_list(pa.struct([("key", pa.string()), ("value", pa.string())])))
        entries = chunk.flatten()
        chunks.append(pa.MapArray.from_arrays(chunk.offsets.cast(pa.int32()), entries.field("key"),
                                              entries.field("value"), type=target, mask=chunk.is_null()))
    return pa.chunked_array(chunks, type=target)


def assert_is_the_corpus(rows: pa.Table, corpus: list[Sent], what: str) -> None:
    assert rows.num_rows == len(corpus), what
    views = []
    for row in rows.select(["ledger_id", "entry_id", "batch_index", "message_id", "payload", "key",
                            "properties", "event_time", "topic"]).to_pylist():
        mid = pulsar.MessageId.deserialize(row["message_id"])
        assert id_of(mid) == (row["ledger_id"], row["entry_id"], row["batch_index"]), what
        assert row["topic"] == TOPIC, what
        event_ms = 0 if row["event_time"] is None else (row["event_time"] - EPOCH) // MILLISECOND
        views.append((id_of(mid), row["payload"] or b"", row["key"] or "", dict(row["properties"] or []), event_ms))
    assert_same_messages(views, corpus, what)
    assert rows.column("producer_name").to_pylist() == [s.producer for s in corpus], what


def pyarrow_dataset(w: World) -> ds.Dataset:
    return ds.dataset(f"{w.s3.bucket}/{w.s3.topic_prefix(TOPIC).rstrip('/')}", format="parquet",
                      filesystem=w.s3.filesystem())


def read_with_duckdb(w: World) -> pa.Table:
    import duckdb
    objects = pyarrow_dataset(w)
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "TimeZone": "UTC"})
    try:
        con.register("objects", objects)
        columns = ", ".join(f'"{c}"' for c in MESSAGE_COLUMNS)      # quoted: `offset` is an SQL keyword
        return con.sql(f"select {columns} from objects").to_arrow_table()
    finally:
        con.close()


def read_with_polars(w: World) -> pa.Table:
    import polars as pl
    options = {"aws_access_key_id": w.s3.access_key, "aws_secret_access_key": w.s3.secret_key,
               "aws_endpoint_url": w.s3.endpoint, "aws_region": w.s3.region, "aws_allow_http": "true"}
    url = f"s3://{w.s3.bucket}/{w.s3.topic_prefix(TOPIC)}*.parquet"
    return pl.scan_parquet(url, storage_options=options).select(list(MESSAGE_COLUMNS)).collect().to_arrow()


def iceberg_table(w: World) -> Any:
    return iceberg_table_of(w, NS, "events")


def iceberg_table_of(w: World, ns: str, local: str) -> Any:
    """A topic's table, found as any pyiceberg user would: a SqlCatalog over the cluster's
    metadata database, the bucket's S3 settings, identifier tenant.namespace.topic."""
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("strata", uri=w.sa.metadata_url, **{
        "s3.endpoint": w.s3.endpoint, "s3.access-key-id": w.s3.access_key,
        "s3.secret-access-key": w.s3.secret_key, "s3.region": w.s3.region})
    return cat.load_table(f"{ns.replace('/', '.')}.{local}")


def test_offload_succeeded_and_the_table_has_one_file_per_ledger(world: World) -> None:
    w = world
    assert w.status["status"] == "SUCCESS", w.status
    assert len(w.closed) >= 5, f"the corpus should span several ledgers: {w.closed}"
    objects = w.s3.list_objects(w.s3.topic_prefix(TOPIC))
    assert objects.keys() == {w.s3.ledger_key(TOPIC, ledger) for ledger in w.closed}
    table = iceberg_table(w)
    files = table.inspect.files()
    assert sorted(files.column("file_path").to_pylist()) == sorted(f"s3://{w.s3.bucket}/{k}" for k in objects)
    assert dict(zip(files.column("file_path").to_pylist(), files.column("file_size_in_bytes").to_pylist(),
                    strict=True)) == {f"s3://{w.s3.bucket}/{k}": size for k, size in objects.items()}
    assert not table.location().startswith(f"s3://{w.s3.bucket}/{w.s3.topic_prefix(TOPIC)}")


def test_pyarrow_duckdb_polars_and_iceberg_read_the_same_rows(world: World) -> None:
    w = world
    by_pyarrow = message_rows(pyarrow_dataset(w).to_table())
    assert_is_the_corpus(by_pyarrow, w.corpus, "pyarrow.dataset")
    readers = {"duckdb": read_with_duckdb, "polars": read_with_polars,
               "pyiceberg": lambda w: iceberg_table(w).scan().to_arrow()}
    for name, read in readers.items():
        rows = message_rows(read(w))
        assert rows.num_rows == by_pyarrow.num_rows, name
        for column in MESSAGE_COLUMNS:
            assert rows.column(column).equals(by_pyarrow.column(column)), f"{name}: column {column} differs"


def test_iceberg_prunes_by_ledger_and_time(world: World) -> None:
    w = world
    table = iceberg_table(w)
    ledger = w.closed[len(w.closed) // 2]
    scan = table.scan(row_filter=f"ledger_id == {ledger}")
    assert [t.file.file_path for t in scan.plan_files()] == [f"s3://{w.s3.bucket}/{w.s3.ledger_key(TOPIC, ledger)}"]
    rows = message_rows(scan.to_arrow())
    assert_is_the_corpus(rows, [s for s in w.corpus if s.msg_id[0] == ledger], f"iceberg scan of ledger {ledger}")
    everything = message_rows(table.scan().to_arrow())
    cut = everything.column("publish_time")[everything.num_rows // 2].as_py()
    later = table.scan(row_filter=f"publish_time >= '{cut.isoformat()}'").to_arrow()
    expected = everything.filter(pc.greater_equal(everything.column("publish_time"), pa.scalar(cut)))
    assert message_rows(later).equals(expected)


def table_files(w: World, table_name: str) -> set[str]:
    tenant, ns, local = table_name.split("/")
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog("strata", uri=w.sa.metadata_url, **{
        "s3.endpoint": w.s3.endpoint, "s3.access-key-id": w.s3.access_key,
        "s3.secret-access-key": w.s3.secret_key, "s3.region": w.s3.region})
    try:
        return set(cat.load_table((tenant, ns, local)).inspect.files().column("file_path").to_pylist())
    finally:
        cat.engine.dispose()


def test_a_partitioned_topic_is_one_table_over_its_partitions(world: World) -> None:
    w = world
    ns = f"public/any-engine-parted-{os.getpid()}"
    ensure_namespace(w.sa.admin_url, ns)
    topic = f"persistent://{ns}/parted"
    admin = Admin(w.sa.admin_url)
    assert http("PUT", admin.topic_url(topic, "partitions"), 2)[0] == 204
    client = make_client(w.sa.service_url)
    try:
        sent = produce_corpus(client, topic, 2_000, SEED + 1, chunk=250, batch_messages_max=5)
    finally:
        client.close()
    keys_of_objects: set[str] = set()
    for index in range(2):
        partition = f"{topic}-partition-{index}"
        ledgers = admin.ledgers(partition)
        assert admin.offload(partition, int(ledgers[-1]["ledgerId"]))[0] == 204
        assert admin.wait_offload_finished(partition, OFFLOAD_TIMEOUT_S)["status"] == "SUCCESS"
        keys_of_objects |= set(w.s3.list_objects(f"{w.s3.topic_prefix(topic)}partition-{index}/"))
    assert table_files(w, f"{ns}/parted") == {f"s3://{w.s3.bucket}/{k}" for k in keys_of_objects}
    by_iceberg = message_rows(iceberg_table_of(w, ns, "parted").scan().to_arrow())
    by_pyarrow = message_rows(w.s3.read_table(w.s3.topic_prefix(topic)))   # both partition folders
    assert by_iceberg.equals(by_pyarrow) and 0 < by_iceberg.num_rows < len(sent)
    assert set(by_iceberg.column("partition").to_pylist()) == {0, 1}


def test_retention_removes_the_trimmed_ledgers_files_from_the_table(world: World) -> None:
    w = world
    ns = f"public/any-engine-retention-{os.getpid()}"
    ensure_namespace(w.sa.admin_url, ns)
    topic = f"persistent://{ns}/trimmed"
    admin = Admin(w.sa.admin_url)
    status, body = http("POST", admin.ns_url(ns, "retention"), {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    assert status == 204, (status, body)
    client = make_client(w.sa.service_url)
    try:
        consumer = client.subscribe(topic, "acks-all", initial_position=pulsar.InitialPosition.Earliest)
        sent = produce_corpus(client, topic, 1_500, SEED + 2, chunk=250, batch_messages_max=5)
        ledgers = admin.ledgers(topic)
        closed = {int(x["ledgerId"]) for x in ledgers[:-1] if x["entries"] > 0}
        assert len(closed) >= 2
        assert admin.offload(topic, int(ledgers[-1]["ledgerId"]))[0] == 204
        assert admin.wait_offload_finished(topic, OFFLOAD_TIMEOUT_S)["status"] == "SUCCESS"
        assert table_files(w, f"{ns}/trimmed") == {f"s3://{w.s3.bucket}/{w.s3.ledger_key(topic, x)}" for x in closed}
        for _ in sent:
            consumer.acknowledge(consumer.receive(30_000))
        wait_until(lambda: not table_files(w, f"{ns}/trimmed"), 60, what="the trimmed ledgers' files out of the table",
                   interval_s=0.3)
        wait_until(lambda: not w.s3.list_objects(w.s3.topic_prefix(topic)), 60,
                   what="the trimmed ledgers' objects deleted", interval_s=0.3)
    finally:
        client.close()


def test_spark_source_reads_the_same_rows(world: World, spark: Any) -> None:
    w = world
    options = {"topic": TOPIC, "metadataUrl": w.sa.metadata_url, "s3.endpoint": w.s3.endpoint,
               "s3.accessKey": w.s3.access_key, "s3.secretKey": w.s3.secret_key, "s3.bucket": w.s3.bucket,
               "s3.prefix": w.s3.prefix, "s3.region": w.s3.region}
    frame = spark.read.format("strata").options(**options).load()
    rows = message_rows(frame.select(*MESSAGE_COLUMNS).toArrow())
    by_pyarrow = message_rows(pyarrow_dataset(w).to_table())
    for column in MESSAGE_COLUMNS:
        assert rows.column(column).equals(by_pyarrow.column(column)), f"spark: column {column} differs"
    assert_is_the_corpus(rows, w.corpus, "spark.read.format('strata')")


def test_embedded_standalone_registers_its_topics(tmp_path: Any) -> None:
    """`strata standalone` with its own SeaweedFS and SQLite metadata: offloaded ledgers are in
    the topic's table too, read with the credentials the standalone keeps in its data dir."""
    from pyiceberg.catalog.sql import SqlCatalog
    topic = "persistent://public/default/embedded"
    env = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "20", "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}
    with StandaloneProcess.start(tmp_path / "data", env=env, embedded_s3=True) as sa:
        client = make_client(sa.service_url)
        producer = client.create_producer(topic, batching_enabled=False)
        payloads = [b"embedded %d" % i for i in range(100)]
        for payload in payloads:
            producer.send(payload, partition_key=f"k{len(payload) % 3}")
        client.close()
        sa.restart()
        client = make_client(sa.service_url)
        client.create_reader(topic, pulsar.MessageId.earliest).close()
        client.close()
        admin = Admin(sa.admin_url)
        status, body = admin.offload(topic, int(admin.ledgers(topic)[-1]["ledgerId"]))
        assert status == 204, (status, body)
        assert admin.wait_offload_finished(topic, OFFLOAD_TIMEOUT_S)["status"] == "SUCCESS"
        credentials = sa.s3_credentials()
        cat = SqlCatalog("strata", uri=sa.metadata_url, **{
            "s3.endpoint": sa.s3_endpoint, "s3.access-key-id": credentials["access_key"],
            "s3.secret-access-key": credentials["secret_key"], "s3.region": "us-east-1"})
        rows = cat.load_table("public.default.embedded").scan().to_arrow().sort_by(ORDER)
        assert rows.column("payload").to_pylist() == payloads
        closed = {int(x["ledgerId"]) for x in admin.ledgers(topic)[:-1] if x["entries"] > 0}
        assert set(rows.column("ledger_id").to_pylist()) == closed and len(closed) >= 5
        cat.engine.dispose()
