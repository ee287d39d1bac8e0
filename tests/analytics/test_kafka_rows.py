"""What a Kafka producer writes is a row like any other (docs/kafka.md): in the Spark source over
the bookies, in the offloaded Parquet objects and in the Spark source over S3, beside what a
Pulsar producer wrote to the same partition, each row with its Kafka offset.

One standalone (Kafka listener on, offload to the session's SeaweedFS, ledgers rolling every 4
entries, nothing trimmed). A Kafka topic is created with one partition through confluent-kafka's
AdminClient; confluent-kafka (idempotent, batches of 3 records) writes N records with explicit
timestamps, headers (one value not UTF-8), keys (one not UTF-8, one null) and a tombstone; then the
official pulsar-client writes M messages to `...-partition-0` (a batching producer and a
non-batching one) with keys, properties and event times. Then:
- a Kafka consumer reads offsets 0..N+M-1, each the message expected there;
- the Spark source over the topic reads only the bookies (every slice hot, the open ledger up to
  its last confirmed entry): N+M rows whose `offset` is 0..N+M-1 in message-id order, each with
  the key, payload, properties and event time the mapping gives;
- a query starting at the open ledger's last entry (as a stream's next micro-batch does) gets the
  same rows with their offsets (the open ledger's index is checkpointed only every 1,000 entries:
  a hot slice starting past the checkpoint counts the messages from it);
- the topic is unloaded (its last ledger closes), every ledger with entries is offloaded through
  the admin REST; the partition's Parquet objects (pyarrow) and the Spark source (every slice cold
  now) give the same rows, with the same offsets, as the hot read.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pulsar
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from analytics.plan import ColdSlice, HotSlice
from analytics.source import StrataReader
from offload.message_table import MESSAGE_COLUMNS
from tests.acceptance.conftest import make_client
from tests.support.offload_checks import Admin, S3Access, http
from tests.support.seaweed import TestSeaweed
from tests.support.standalone_proc import StandaloneProcess

KAFKA_TOPIC = f"kafka-rows-{os.getpid()}"
TOPIC = f"persistent://public/default/{KAFKA_TOPIC}"          # kafka_default_namespace
PARTITION = f"{TOPIC}-partition-0"
PREFIX = f"kafka-rows-{os.getpid()}"
KAFKA_RECORDS = 24                 # N: 8 flushes of 3 records, so 8 multi-record batches (entries)
KAFKA_PER_BATCH = 3
PULSAR_BATCHED = 6                 # M = 6 batched (batches of up to 3) + 4 single-message entries
PULSAR_SINGLE = 4
TOTAL = KAFKA_RECORDS + PULSAR_BATCHED + PULSAR_SINGLE
TIME_BASE_MS = 1_700_000_000_000
BINARY_KEY = b"\xff\x00\xfekey"
BINARY_HEADER = b"\xff\xfe\x00\x80bin"
CALL_TIMEOUT_S = 20.0
OFFLOAD_TIMEOUT_S = 60.0
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "4",
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       # keep every ledger: with no subscription and no retention the broker would trim them all
       "STRATA_RETENTION_TIME_MINUTES": "-1", "STRATA_RETENTION_SIZE_MB": "-1"}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MILLISECOND = datetime.timedelta(milliseconds=1)
pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Expected:
    """One message as a row must show it (docs/kafka.md's mapping), at its offset."""

    offset: int
    key: str | None                 # a non-UTF-8 Kafka key: its base64
    kafka_key: bytes | None         # what a Kafka consumer gets as the key
    payload: bytes | None           # a Kafka tombstone: null
    properties: dict[str, str]
    event_ms: int
    kafka: bool                     # written by the Kafka producer


@dataclass
class World:
    sa: StandaloneProcess
    admin: Admin
    s3: S3Access
    expected: list[Expected]
    pulsar_ids: dict[int, tuple[int, int, int]]    # offset -> the id the Pulsar producer got

    def options(self) -> dict[str, str]:
        return {"topic": TOPIC, "metadataUrl": self.sa.metadata_url, "admin.url": self.sa.admin_url,
                "s3.endpoint": self.s3.endpoint, "s3.accessKey": self.s3.access_key,
                "s3.secretKey": self.s3.secret_key, "s3.bucket": self.s3.bucket, "s3.prefix": self.s3.prefix,
                "s3.region": self.s3.region}


def kafka_records() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    """(key, value, headers, timestamp) of the N Kafka records."""
    out = []
    for i in range(KAFKA_RECORDS):
        key: bytes | None = b"k-%d" % (i % 5)
        value: bytes | None = b"kafka value %d" % i
        headers = [("src", b"kafka"), ("n", str(i).encode())]
        if i == 4:
            key = BINARY_KEY
        if i == 7:
            key = None
        if i == 10:
            value = None                                # a tombstone
        if i == 13:
            headers.append(("blob", BINARY_HEADER))
        out.append((key, value, headers, TIME_BASE_MS + i * 1000))
    return out


def expected_of_kafka(offset: int, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]],
                      ts: int) -> Expected:
    if key is None:
        key_text = None
    else:
        try:
            key_text = key.decode()
        except UnicodeDecodeError:
            key_text = base64.b64encode(key).decode()
    properties, b64 = {}, []
    for name, raw in headers:
        try:
            properties[name] = raw.decode()
        except UnicodeDecodeError:
            properties[name] = base64.b64encode(raw).decode()
            b64.append(name)
    if b64:
        properties["__kafka_b64_headers"] = json.dumps(b64)
    return Expected(offset, key_text, key, value, properties, ts, kafka=True)


def produce_with_kafka(bootstrap: str) -> list[Expected]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000,
                         "allow.auto.create.topics": False})
    futures = admin.create_topics([NewTopic(KAFKA_TOPIC, 1, 1)], request_timeout=CALL_TIMEOUT_S)
    futures[KAFKA_TOPIC].result(CALL_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50,
                         "message.timeout.ms": 20_000, "socket.timeout.ms": 10_000})
    delivered: list[tuple[int, int]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    records = kafka_records()
    for start in range(0, len(records), KAFKA_PER_BATCH):
        for key, value, headers, ts in records[start:start + KAFKA_PER_BATCH]:
            producer.produce(KAFKA_TOPIC, key=key, value=value, headers=headers, timestamp=ts,
                             partition=0, on_delivery=on_delivery)
        assert producer.flush(CALL_TIMEOUT_S) == 0, "every record delivered in time"
    assert not errors, errors
    assert delivered == [(0, i) for i in range(KAFKA_RECORDS)], "the broker's offsets are 0..N-1, in order"
    return [expected_of_kafka(i, *rec) for i, rec in enumerate(records)]


def produce_with_pulsar(service_url: str) -> tuple[list[Expected], dict[int, tuple[int, int, int]]]:
    client = make_client(service_url)
    expected: list[Expected] = []
    ids: dict[int, tuple[int, int, int]] = {}
    try:
        batched = client.create_producer(PARTITION, producer_name=f"pulsar-batched-{os.getpid()}",
                                         batching_enabled=True, batching_max_messages=3,
                                         batching_max_publish_delay_ms=50)
        single = client.create_producer(PARTITION, producer_name=f"pulsar-single-{os.getpid()}",
                                        batching_enabled=False)
        acks: dict[int, list] = {}
        for i in range(PULSAR_BATCHED + PULSAR_SINGLE):
            offset = KAFKA_RECORDS + i
            payload, key = b"pulsar value %d" % i, f"p-{i % 3}"
            properties = {"src": "pulsar", "n": str(i)}
            event_ms = TIME_BASE_MS + 100_000 + i * 1000
            if i < PULSAR_BATCHED:
                acks[offset] = []
                batched.send_async(payload, lambda res, mid, got=acks[offset]: got.append((res, mid)),
                                   partition_key=key, properties=properties, event_timestamp=event_ms)
                if i % 3 == 2:
                    batched.flush()
            else:
                mid = single.send(payload, partition_key=key, properties=properties, event_timestamp=event_ms)
                ids[offset] = (mid.ledger_id(), mid.entry_id(), mid.batch_index())
            expected.append(Expected(offset, key, key.encode(), payload, properties, event_ms, kafka=False))
        batched.flush()
        for offset, got in acks.items():
            ((result, mid),) = got
            assert result == pulsar.Result.Ok, result
            ids[offset] = (mid.ledger_id(), mid.entry_id(), mid.batch_index())
    finally:
        client.close()
    return expected, ids


@pytest.fixture(scope="module")
def world(s3_server: TestSeaweed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    bucket = "kafka-rows"
    s3 = S3Access.of(s3_server, bucket, PREFIX)
    env = {**s3_server.standalone_env(bucket, PREFIX), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("kafka-rows") / "data", env=env) as sa:
        expected = produce_with_kafka(sa.kafka_bootstrap)
        more, ids = produce_with_pulsar(sa.service_url)
        yield World(sa, Admin(sa.admin_url), s3, expected + more, ids)


def slices_of(world: World) -> list:
    reader = StrataReader(world.options())
    return [piece for partition in reader.partitions() for piece in partition.value[0]]


def spark_rows(spark: Any, world: World) -> list[dict]:
    frame = spark.read.format("strata").options(**world.options()).load()
    return [row.asDict(recursive=True) for row in
            frame.select(*MESSAGE_COLUMNS).orderBy("ledger_id", "entry_id", "batch_index").collect()]


def event_ms_of(value: datetime.datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:                                   # Spark: naive UTC (session time zone UTC)
        value = value.replace(tzinfo=datetime.UTC)
    return (value - EPOCH) // MILLISECOND


def assert_rows_are_the_messages(rows: list[dict], world: World, what: str) -> None:
    """rows in message-id order: offsets 0..N+M-1, each the message written at that offset."""
    assert [r["offset"] for r in rows] == list(range(TOTAL)), f"{what}: offsets"
    for row, want in zip(rows, world.expected, strict=True):
        properties = row["properties"]
        got = (row["key"], None if row["payload"] is None else bytes(row["payload"]),
               dict(properties.items() if isinstance(properties, dict) else properties or []),
               event_ms_of(row["event_time"]))
        assert got == (want.key, want.payload, want.properties, want.event_ms), f"{what}: offset {want.offset}"
        assert row["topic"] == PARTITION and row["partition"] == 0, what
        assert row["producer_name"].startswith("kafka-") == want.kafka, f"{what}: {row['producer_name']}"
        mid = pulsar.MessageId.deserialize(bytes(row["message_id"]))
        assert (mid.ledger_id(), mid.entry_id(), mid.batch_index()) == \
            (row["ledger_id"], row["entry_id"], row["batch_index"]), what
        if not want.kafka:
            assert world.pulsar_ids[want.offset] == (row["ledger_id"], row["entry_id"], row["batch_index"]), \
                f"{what}: offset {want.offset} is the message the Pulsar producer was acked for"
    kafka_entries = {(r["ledger_id"], r["entry_id"]) for r in rows if r["producer_name"].startswith("kafka-")}
    assert len(kafka_entries) < KAFKA_RECORDS, f"{what}: a Kafka record batch is one entry of several rows"
    assert len({r["ledger_id"] for r in rows}) >= 3, f"{what}: the messages span several ledgers"


@pytest.fixture(scope="module")
def hot_rows(world: World, spark: Any) -> list[dict]:
    """The Spark source's rows before anything is offloaded (so every slice is a bookie read)."""
    slices = slices_of(world)
    assert slices and all(isinstance(s, HotSlice) for s in slices), slices
    return spark_rows(spark, world)


@pytest.fixture(scope="module")
def open_ledger_tail(world: World, spark: Any, hot_rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Before the offload: (rows of a batch query starting at the open ledger's last entry, as a
    stream's next micro-batch would, the hot rows from that entry on)."""
    ledger, entry = hot_rows[-1]["ledger_id"], hot_rows[-1]["entry_id"]
    assert entry > 0, "the open ledger holds more than one entry"
    options = {**world.options(), "topic": PARTITION, "startingOffsets": json.dumps({PARTITION: f"{ledger}:{entry}"})}
    frame = spark.read.format("strata").options(**options).load()
    rows = [row.asDict(recursive=True) for row in
            frame.select(*MESSAGE_COLUMNS).orderBy("ledger_id", "entry_id", "batch_index").collect()]
    return rows, [r for r in hot_rows if (r["ledger_id"], r["entry_id"]) >= (ledger, entry)]


@pytest.fixture(scope="module")
def offloaded(world: World, hot_rows: list[dict], open_ledger_tail: Any) -> list[int]:
    """Unload the partition (its ledger closes), load it again, offload every ledger before the new
    one; the ids of the ledgers with entries, all offloaded."""
    status, body = http("PUT", world.admin.topic_url(PARTITION, "unload"))
    assert status in (200, 204), (status, body)
    client = make_client(world.sa.service_url)
    try:
        client.create_reader(PARTITION, pulsar.MessageId.earliest).close()      # load it again: a new ledger
    finally:
        client.close()
    ledgers = world.admin.ledgers(PARTITION)
    with_entries = [int(x["ledgerId"]) for x in ledgers[:-1] if x["entries"] > 0]
    assert {r["ledger_id"] for r in hot_rows} == set(with_entries), "every message is in a closed ledger now"
    status, body = world.admin.offload(PARTITION, int(ledgers[-1]["ledgerId"]))
    assert status in (200, 204), (status, body)
    done = world.admin.wait_offload_finished(PARTITION, OFFLOAD_TIMEOUT_S)
    assert done["status"] == "SUCCESS", done
    now = {int(x["ledgerId"]): x for x in world.admin.ledgers(PARTITION)}
    assert all(now[ledger].get("offloaded") for ledger in with_entries), now
    return with_entries


def test_a_kafka_consumer_reads_every_message_at_its_offset(world: World) -> None:
    consumer = Consumer({"bootstrap.servers": world.sa.kafka_bootstrap, "group.id": f"never-committed-{os.getpid()}",
                         "enable.auto.commit": False, "auto.offset.reset": "error",
                         "socket.timeout.ms": 10_000, "session.timeout.ms": 10_000})
    got: dict[int, tuple] = {}
    try:
        consumer.assign([TopicPartition(KAFKA_TOPIC, 0, 0)])
        for _ in range(300):
            if len(got) >= TOTAL:
                break
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.offset()] = (msg.key(), msg.value(), msg.timestamp()[1])
    finally:
        consumer.close()
    assert sorted(got) == list(range(TOTAL))
    assert [got[w.offset] for w in world.expected] == [(w.kafka_key, w.payload, w.event_ms) for w in world.expected]


def test_the_spark_source_reads_the_hot_rows_with_their_offsets(world: World, hot_rows: list[dict]) -> None:
    assert_rows_are_the_messages(hot_rows, world, "spark over the bookies")


def test_a_read_starting_inside_the_open_ledger_has_the_offsets(open_ledger_tail: tuple) -> None:
    rows, expected = open_ledger_tail
    assert [r["offset"] for r in rows] == [r["offset"] for r in expected]
    assert rows == expected


def test_the_offloaded_parquet_rows_carry_the_offsets(world: World, offloaded: list[int]) -> None:
    folder = f"{world.s3.topic_prefix(TOPIC)}partition-0/"
    objects = world.s3.list_objects(folder)
    assert set(objects) == {f"{folder}ledger-{ledger:020d}.parquet" for ledger in offloaded}
    table = world.s3.read_table(folder).select(list(MESSAGE_COLUMNS))
    table = table.sort_by([("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")])
    assert table.column("offset").null_count == 0
    assert_rows_are_the_messages(table.to_pylist(), world, "the Parquet objects")


def test_the_spark_source_reads_the_same_rows_from_s3(world: World, spark: Any, hot_rows: list[dict],
                                                      offloaded: list[int]) -> None:
    slices = slices_of(world)
    assert {s.ledger_id for s in slices if isinstance(s, ColdSlice)} == set(offloaded)
    assert not [s for s in slices if isinstance(s, HotSlice) and s.ledger_id in offloaded]
    cold = spark_rows(spark, world)
    assert_rows_are_the_messages(cold, world, "spark over S3")
    assert cold == hot_rows, "the same rows, column for column, whether read hot or cold"
