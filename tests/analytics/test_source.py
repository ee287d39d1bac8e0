"""The `strata` Spark source, batch (issue 13 items 1, 2, 7, 8): a real standalone, a real
SeaweedFS and the session's real SparkSession.

One standalone for the module. A corpus of batched messages (three producers: plain, LZ4, ZSTD;
keys, properties, event times) goes to a topic whose ledgers roll every 12 entries; a restart
closes them, the first half is offloaded, and a tail is produced into the open ledger. So one
query reads offloaded ledgers from S3, closed ledgers from the bookies and the open ledger up to
its last confirmed entry.

What must hold:
- every message up to the snapshot appears exactly once, with the payload, key, properties,
  event time and message id bytes the producers got, and reads are spread over several Spark
  partitions, cold and hot;
- startingOffsets/endingOffsets select exactly [start, end); publish_time, key, partition,
  ledger_id, entry_id and message_id filters are answered by the source (none left for Spark),
  prune ledgers, objects and row groups (fewer slices, the planner's counts) and give the same
  rows as Python's filter of the whole topic;
- bad input (unknown option, unknown topic, end before start, unparsable JSON, a missing or
  damaged object) is a clear error before any work starts.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pulsar
import pytest

from analytics.plan import ColdSlice, HotSlice
from analytics.source import StrataReader
from tests.acceptance.conftest import make_client
from tests.support.namespaces import ensure_namespace
from tests.support.offload_checks import Admin, S3Access, Sent, id_of, in_id_order, produce_corpus
from tests.support.seaweed import TestSeaweed
from tests.support.standalone_proc import StandaloneProcess

MESSAGES = 6_000
TAIL_MESSAGES = 300
SEED = 1313
NS = f"public/spark-{os.getpid()}"
TOPIC = f"persistent://{NS}/corpus"
PREFIX = f"spark-{os.getpid()}"
OFFLOAD_TIMEOUT_S = 120.0
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "12",
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       "STRATA_OFFLOAD_ROW_GROUP_BYTES": str(64 * 1024),
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "500",
       # keep every ledger: with no subscription and no retention the broker would trim them all
       "STRATA_RETENTION_TIME_MINUTES": "-1", "STRATA_RETENTION_SIZE_MB": "-1"}
# the module's standalone (produce, restart, offload) and the first query's Spark start-up fall in
# the first test's time on a loaded 2-core box
pytestmark = pytest.mark.timeout(600)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)   # Spark gives naive UTC datetimes (session tz UTC)
MILLISECOND = datetime.timedelta(milliseconds=1)


@dataclass
class World:
    sa: StandaloneProcess
    admin: Admin
    s3: S3Access
    corpus: list[Sent]
    tail: list[Sent]
    offloaded: set[int]

    def options(self, **extra: str) -> dict[str, str]:
        return {"metadataUrl": self.sa.metadata_url, "admin.url": self.sa.admin_url,
                "s3.endpoint": self.s3.endpoint, "s3.accessKey": self.s3.access_key,
                "s3.secretKey": self.s3.secret_key, "s3.bucket": self.s3.bucket, "s3.prefix": self.s3.prefix,
                **extra}

    @property
    def everything(self) -> list[Sent]:
        return self.corpus + self.tail


@pytest.fixture(scope="module")
def world(s3_server: TestSeaweed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    bucket = "spark-source"
    s3 = S3Access.of(s3_server, bucket, PREFIX)
    env = {**s3_server.standalone_env(bucket, PREFIX), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("spark") / "data", env=env) as sa:
        ensure_namespace(sa.admin_url, NS)
        admin = Admin(sa.admin_url)
        client = make_client(sa.service_url)
        corpus = in_id_order(produce_corpus(client, TOPIC, MESSAGES, SEED, chunk=300))
        client.close()
        sa.restart()                       # closes the corpus' last ledger
        client = make_client(sa.service_url)
        client.create_reader(TOPIC, pulsar.MessageId.earliest).close()   # load the topic
        ledgers = admin.ledgers(TOPIC)
        middle = ledgers[len(ledgers) // 2]["ledgerId"]
        status, body = admin.offload(TOPIC, middle)
        assert status in (200, 204), (status, body)
        done = admin.wait_offload_finished(TOPIC, OFFLOAD_TIMEOUT_S)
        assert done["status"] == "SUCCESS", done
        offloaded = {int(entry["ledgerId"]) for entry in admin.ledgers(TOPIC) if entry.get("offloaded")}
        tail = in_id_order(produce_corpus(client, TOPIC, TAIL_MESSAGES, SEED + 1, chunk=100))
        client.close()
        yield World(sa, admin, s3, corpus, tail, offloaded)


def rows_of(df: Any) -> list[dict]:
    return [row.asDict(recursive=True) for row in df.orderBy("ledger_id", "entry_id", "batch_index").collect()]


def view_of_row(row: dict) -> tuple:
    event = row["event_time"]
    event_ms = None if event is None else int((event.replace(tzinfo=datetime.UTC) - EPOCH) / MILLISECOND)
    return (bytes(row["payload"] or b""), row["key"], dict(row["properties"]), event_ms,
            id_of(pulsar.MessageId.deserialize(bytes(row["message_id"]))))


def view_of_sent(sent: Sent) -> tuple:
    return (sent.payload, sent.key, sent.properties, sent.event_time_ms, sent.msg_id)


def plan_of(world: World, filters: list | None = None, **options: str) -> list:
    reader = StrataReader(world.options(topic=TOPIC, **options))
    if filters is not None:
        reader.pushFilters(filters)
    return [piece for partition in reader.partitions() for piece in partition.value[0]]


def test_reads_every_message_once_from_s3_the_bookies_and_the_open_ledger(spark, world: World) -> None:
    df = spark.read.format("strata").options(**world.options(topic=TOPIC)).load()
    rows = rows_of(df)
    assert [view_of_row(r) for r in rows] == [view_of_sent(s) for s in world.everything]
    assert {r["topic"] for r in rows} == {TOPIC} and {r["partition"] for r in rows} == {-1}
    assert {r["producer_name"] for r in rows} == {s.producer for s in world.everything}
    for row in rows[:50]:
        msg_id = pulsar.MessageId.deserialize(bytes(row["message_id"]))
        assert (msg_id.ledger_id(), msg_id.entry_id()) == (row["ledger_id"], row["entry_id"])
    slices = plan_of(world)
    cold = {p.ledger_id for p in slices if isinstance(p, ColdSlice)}
    hot = {p.ledger_id for p in slices if isinstance(p, HotSlice)}
    assert cold == world.offloaded and hot and not cold & hot
    assert max(hot) == world.tail[-1].msg_id[0], "the open ledger is read up to its last confirmed entry"
    assert df.rdd.getNumPartitions() == 1, "128 MiB per Spark partition by default"
    small = spark.read.format("strata").options(**world.options(topic=TOPIC, partitionBytes="65536")).load()
    assert small.rdd.getNumPartitions() > 4
    assert small.count() == len(world.everything)


def test_offsets_select_exactly_the_range(spark, world: World) -> None:
    everything = world.everything
    start, end = everything[1000].msg_id, everything[4500].msg_id
    options = world.options(topic=TOPIC, startingOffsets=f'{{"{TOPIC}": "{start[0]}:{start[1]}"}}',
                            endingOffsets=f'{{"{TOPIC}": [{end[0]}, {end[1]}]}}')
    rows = rows_of(spark.read.format("strata").options(**options).load())
    expected = [s for s in everything if start[:2] <= s.msg_id[:2] < end[:2]]
    assert [view_of_row(r) for r in rows] == [view_of_sent(s) for s in expected]


def _filters_left_to_spark(df: Any) -> str:
    """The Filter nodes of the executed plan (what Spark still applies to the source's rows)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return "\n".join(line for line in plan.splitlines() if "Filter " in line)


def test_answered_filters_prune_and_give_the_rows_spark_would(spark, world: World) -> None:
    """publish_time, key, partition, ledger_id, entry_id and message_id comparisons: the same rows
    as Python's filter of the whole topic, and no Filter left in Spark's plan; a message id leaves
    one Spark partition of the many (one per row group or hot range with partitionBytes=1)."""
    from pyspark.sql import functions as F

    df = spark.read.format("strata").options(**world.options(topic=TOPIC)).load()
    everything = rows_of(df)
    pick = everything[len(everything) // 3]
    times = sorted({r["publish_time"] for r in everything})
    low, high = times[len(times) // 3], times[len(times) // 2]
    cases = [
        (F.col("message_id") == F.lit(bytes(pick["message_id"])), lambda r: r["message_id"] == pick["message_id"]),
        ((F.col("publish_time") >= F.lit(low)) & (F.col("publish_time") < F.lit(high)) & (F.col("key") == pick["key"]),
         lambda r: low <= r["publish_time"] < high and r["key"] == pick["key"]),
        (F.col("entry_id").isin(0, 1) & (F.col("partition") == -1) & (F.col("ledger_id") <= pick["ledger_id"]),
         lambda r: r["entry_id"] in (0, 1) and r["ledger_id"] <= pick["ledger_id"]),
    ]
    for condition, keep in cases:
        filtered = df.where(condition)
        expected = [r for r in everything if keep(r)]
        assert expected and rows_of(filtered) == expected, condition
        assert not _filters_left_to_spark(filtered), condition
    one_slice = spark.read.format("strata").options(**world.options(topic=TOPIC, partitionBytes="1")).load()
    assert one_slice.rdd.getNumPartitions() > 10          # planned only: no task runs
    assert one_slice.where(F.col("message_id") == F.lit(bytes(pick["message_id"]))).rdd.getNumPartitions() == 1
    prefix = df.where(F.col("key").startswith("key-1") & (F.col("entry_id") == 0))
    assert "StartsWith" in _filters_left_to_spark(prefix), "what the source cannot answer Spark applies"
    assert rows_of(prefix) == [r for r in everything if r["key"].startswith("key-1") and r["entry_id"] == 0]


def test_pruning_counts_ledgers_objects_and_row_groups(spark, world: World) -> None:
    """The planner's counts: a publish-time window skips row groups of offloaded objects and whole
    ledgers; a message id leaves one ledger and, if offloaded, one row group."""
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    everything = StrataReader(world.options(topic=TOPIC))
    everything.partitions()
    total = everything.counts
    assert total.ledgers_skipped == total.row_groups_skipped == total.objects_skipped == 0
    assert total.objects == len(world.offloaded) and total.row_groups > total.objects
    cold = (spark.read.format("strata").schema("ledger_id bigint, message_id binary, publish_time timestamp")
            .options(**world.options(topic=TOPIC)).load()
            .where(F.col("ledger_id").isin(sorted(world.offloaded))).orderBy("publish_time").collect())
    low = cold[len(cold) // 2]["publish_time"]
    window = StrataReader(world.options(topic=TOPIC))
    assert not list(window.pushFilters([GreaterThanOrEqual(("publish_time",), low),
                                        LessThan(("publish_time",), low + datetime.timedelta(milliseconds=1))]))
    window.partitions()
    counts = window.counts
    assert counts.ledgers_skipped > 0 and counts.row_groups_skipped > 0 and counts.objects_skipped > 0
    assert 0 < counts.row_groups < total.row_groups
    one = StrataReader(world.options(topic=TOPIC))
    assert not list(one.pushFilters([EqualTo(("message_id",), bytes(cold[5]["message_id"]))]))
    one.partitions()
    assert one.counts.ledgers - one.counts.ledgers_skipped == 1
    assert (one.counts.objects, one.counts.row_groups) == (1, 1)


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "message"), [
    ({"topic": TOPIC, "startingOffset": "earliest"}, "unknown option"),
    ({"topic": TOPIC, "topics": TOPIC}, "exactly one of topic"),
    ({"topic": TOPIC, "startingOffsets": "{not json"}, "is not earliest, latest or JSON"),
    ({"topic": TOPIC, "startingOffsets": f'{{"{TOPIC}": "7:x"}}'}, "must be 'ledger:entry'"),
    ({"topic": TOPIC, "startingOffsets": f'{{"{TOPIC}": "9:5"}}', "endingOffsets": f'{{"{TOPIC}": "9:4"}}'},
     "endingOffsets is before startingOffsets"),
    ({"topic": TOPIC, "startingTime": "2000", "endingTime": "1000"}, "endingTime is before startingTime"),
    ({"topic": TOPIC, "startingOffsets": "latest"}, "not allowed in a batch"),
    ({"topic": TOPIC, "failOnDataLoss": "maybe"}, "must be true or false"),
    ({"topic": "persistent://a/b/c/d"}, "bad topic name"),
])
def test_bad_options_fail_before_any_work(spark, world: World, options: dict, message: str) -> None:
    with pytest.raises(Exception, match=message):
        spark.read.format("strata").options(**{**world.options(), **options}).load().count()


def test_an_unknown_topic_fails_at_planning(spark, world: World) -> None:
    with pytest.raises(Exception, match="topic not found"):
        spark.read.format("strata").options(**world.options(topic=f"persistent://{NS}/nope")).load().count()


def test_a_missing_or_damaged_object_fails_at_planning(world: World) -> None:
    from analytics.options import parse_source_options
    from analytics.plan import Footers, Pruning, plan_range
    from analytics.snapshot import LedgerInSnapshot, PartitionSnapshot
    from common.errors import ColdObjectCorrupt, ColdObjectMissing

    options = parse_source_options(world.options(topic=TOPIC), streaming=False)
    s3 = world.s3.client()
    damaged = f"{PREFIX}/damaged/ledger-{1:020d}.parquet"
    s3.put_object(Bucket=world.s3.bucket, Key=damaged, Body=b"PAR1" + os.urandom(5000) + b"PAR1")
    for key, error in ((f"{PREFIX}/missing/ledger-{1:020d}.parquet", ColdObjectMissing),
                       (damaged, ColdObjectCorrupt)):
        snapshot = PartitionSnapshot(TOPIC, -1, (LedgerInSnapshot(1, 10, 1000, 10, 1, 2, key, b""),))
        with pytest.raises(error):
            plan_range(snapshot, (1, 0), (1, 10), options, Pruning(), Footers(options.access))


# --- streaming ---------------------------------------------------------------------------------

def _partitioned(world: World, topic: str, partitions: int) -> None:
    from tests.support.offload_checks import http, topic_path

    status, body = http("PUT", f"{world.sa.admin_url}/admin/v2/persistent/{topic_path(topic)}/partitions", partitions)
    assert status == 204, (status, body)


def _ids(sent: list[Sent], topic: str) -> set:
    return {(topic, s.msg_id) for s in sent}


def test_a_stream_reads_each_message_once_across_restarts_and_replays(spark, world: World, tmp_path) -> None:
    topic = f"persistent://{NS}/stream"
    _partitioned(world, topic, 2)
    client = make_client(world.sa.service_url)
    first = produce_corpus(client, topic, 400, SEED + 5, chunk=100, batch_messages_max=10)
    seen: dict[int, list[tuple]] = {}

    def collect(df: Any, batch_id: int) -> None:
        seen[batch_id] = sorted((r.topic.rsplit("-partition-", 1)[0], (r.ledger_id, r.entry_id, r.batch_index))
                                for r in df.select("topic", "ledger_id", "entry_id", "batch_index").collect())

    def run() -> None:
        stream = spark.readStream.format("strata").options(
            **world.options(topic=topic, startingOffsets="earliest", maxRecordsPerTrigger="150")).load()
        query = (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(180), "the availableNow query ended"
        assert query.exception() is None

    def all_rows() -> list[tuple]:
        return [row for batch in seen.values() for row in batch]

    run()
    assert len(seen) >= 3, f"maxRecordsPerTrigger=150 splits 400 messages into batches: {sorted(seen)}"
    assert sorted(all_rows()) == sorted(_ids(first, topic))
    second = produce_corpus(client, topic, 200, SEED + 6, chunk=100, batch_messages_max=10)
    client.close()
    run()                                     # restarted from the checkpoint: only the new messages
    assert sorted(all_rows()) == sorted(_ids(first + second, topic)), "each message exactly once"
    last = max(seen)
    replayed = seen.pop(last)
    for name in (str(last), f".{last}.crc"):                 # as if the query died before committing it
        (tmp_path / "ckpt" / "commits" / name).unlink(missing_ok=True)
    run()
    assert seen.get(last) == replayed, "a replayed micro-batch reads exactly the same rows"
    assert sorted(all_rows()) == sorted(_ids(first + second, topic))


def test_retention_removed_data_fails_the_query_or_is_skipped(spark, world: World) -> None:
    from tests.support.offload_checks import http
    from tests.support.waiting import wait_until

    ns = f"public/spark-trim-{os.getpid()}"
    ensure_namespace(world.sa.admin_url, ns)
    topic = f"persistent://{ns}/trimmed"
    client = make_client(world.sa.service_url)
    sent = in_id_order(produce_corpus(client, topic, 300, SEED + 7, chunk=100, batch_messages_max=5))
    first = sent[0].msg_id
    status, _ = http("POST", f"{world.sa.admin_url}/admin/v2/namespaces/{ns}/retention",
                     {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    assert status == 204
    admin = world.admin
    wait_until(lambda: admin.ledgers(topic)[0]["ledgerId"] > first[0], 60, what="retention to trim a ledger")
    status, _ = http("POST", f"{world.sa.admin_url}/admin/v2/namespaces/{ns}/retention",
                     {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})     # keep the rest from now on
    assert status == 204
    tail = in_id_order(produce_corpus(client, topic, 7, SEED + 8, chunk=7, batch_messages_max=2))
    client.close()
    options = world.options(topic=topic, startingOffsets=f'{{"{topic}": "{first[0]}:{first[1]}"}}')
    with pytest.raises(Exception, match=r"DataLost|removed"):
        spark.read.format("strata").options(**options).load().count()
    kept = spark.read.format("strata").options(**options, failOnDataLoss="false").load()
    got = sorted((r.ledger_id, r.entry_id, r.batch_index) for r in kept.collect())
    everything = [s.msg_id for s in sent + tail]
    assert got and got == [m for m in everything if m >= got[0]], "what is kept is read, from the first kept entry on"
    assert set(got) >= {s.msg_id for s in tail}


# --- distributed -------------------------------------------------------------------------------

LOCAL_CLUSTER_SCRIPT = """
import json, sys
from analytics.session import strata_session
spark = strata_session("local-cluster[2,1,1024]", app_name="strata-local-cluster")
try:
    options = json.loads(sys.argv[1])
    df = spark.read.format("strata").options(**options).load()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1   # minus the driver
    by_key = {r["key"]: r["n"] for r in df.groupBy("key").count().withColumnRenamed("count", "n").collect()}
    print(json.dumps({"rows": df.count(), "executors": executors, "by_key": by_key,
                      "partitions": df.rdd.getNumPartitions()}))
finally:
    spark.stop()
"""


def test_a_query_runs_on_separate_executor_processes(world: World, tmp_path) -> None:
    """Spark's local-cluster mode: two executor JVMs, each with its own Python workers. The source
    keeps no driver-local state the executors need; credentials travel in the options."""
    import json
    import subprocess
    import sys
    from collections import Counter

    script = tmp_path / "local_cluster.py"
    script.write_text(LOCAL_CLUSTER_SCRIPT)
    options = world.options(topic=TOPIC, partitionBytes="65536")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STRATA_"))}
    done = subprocess.run([sys.executable, str(script), json.dumps(options)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["executors"] == 2 and found["partitions"] > 2
    assert found["rows"] == len(world.everything)
    assert found["by_key"] == dict(Counter(s.key for s in world.everything))


def test_topics_pattern_and_partition_filters(spark, world: World) -> None:
    from pyspark.sql.datasource import EqualTo

    _partitioned(world, f"persistent://{NS}/pattern-p", 2)
    client = make_client(world.sa.service_url)
    sent = {name: produce_corpus(client, f"persistent://{NS}/{name}", 40, SEED + 9, chunk=20)
            for name in ("pattern-a", "pattern-b", "pattern-p", "other")}
    client.close()
    options = world.options(topicsPattern=f"persistent://{re.escape(NS)}/pattern-.*")
    df = spark.read.format("strata").options(**options).load()
    counts = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
    base = f"persistent://{NS}/"
    assert sum(counts.values()) == 120 and set(counts) == {
        base + "pattern-a", base + "pattern-b", base + "pattern-p-partition-0", base + "pattern-p-partition-1"}
    only = df.where("partition = 1")
    assert only.count() == counts[base + "pattern-p-partition-1"]
    reader = StrataReader(options)
    reader.pushFilters([EqualTo(("partition",), 1)])
    topics = {piece.topic for partition in reader.partitions() for piece in partition.value[0]}
    assert topics == {base + "pattern-p-partition-1"}, "the other topic partitions are pruned"
    listed = spark.read.format("strata").options(**world.options(topics=f"{base}pattern-a,{base}pattern-p")).load()
    assert listed.count() == 80 and len(sent["other"]) == 40


def test_json_payloads_decode_into_a_typed_value_column(spark, world: World) -> None:
    import json

    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    topic = f"persistent://{NS}/json"
    client = make_client(world.sa.service_url)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
    payloads = [json.dumps({"id": i, "name": f"n{i}", "extra": True}).encode() for i in range(50)]
    payloads += [b"not json", b'{"id": "not an int"}', b"[1, 2]", b""]
    for payload in payloads:
        producer.send(payload)
    client.close()
    schema = StructType([StructField("id", IntegerType()), StructField("name", StringType())])
    df = spark.read.format("strata").options(**world.options(topic=topic, valueSchema=schema.json())).load()
    assert df.schema["value"].dataType == schema
    values = [r["value"] for r in df.orderBy("ledger_id", "entry_id", "batch_index").select("value").collect()]
    assert [(v["id"], v["name"]) for v in values[:50]] == [(i, f"n{i}") for i in range(50)]
    assert values[50:] == [None] * 4, "what does not decode is null; the raw bytes stay in payload"
    with pytest.raises(Exception, match="valueSchema must be a Spark StructType"):
        spark.read.format("strata").options(**world.options(topic=topic, valueSchema="id INT")).load().count()


def test_a_narrower_schema_reads_only_its_columns(spark, world: World) -> None:
    from collections import Counter

    df = spark.read.format("strata").schema("key string, ledger_id bigint").options(**world.options(topic=TOPIC)).load()
    assert df.columns == ["key", "ledger_id"]
    counts = {r["key"]: r["count"] for r in df.groupBy("key").count().collect()}
    assert counts == dict(Counter(s.key for s in world.everything))
    with pytest.raises(Exception, match="not a message column"):
        spark.read.format("strata").schema("nope string").options(**world.options(topic=TOPIC)).load().count()
    with pytest.raises(Exception, match="must have type bigint"):
        spark.read.format("strata").schema("ledger_id int").options(**world.options(topic=TOPIC)).load().count()


def test_offset_of_a_hot_slice_start_and_older_objects_without_the_column() -> None:
    """A hot slice's first offset comes from its ledger's first offset and index blob (-1 past
    what the blob covers, or with no first offset); a cold batch of an object without the
    `offset` column gets it as nulls, in the source's column order."""
    import pyarrow as pa

    from analytics.read import _conform, _with_nulls
    from analytics.snapshot import LedgerInSnapshot
    from offload.message_table import MESSAGE_ONLY_SCHEMA

    ledger = LedgerInSnapshot(4, 5, 500, 9, 1, 2, "", b"{}", first_offset=100, msg_end=(3, 4, 9))
    assert [ledger.offset_of(e) for e in range(5)] == [100, 103, 104, 109, -1]
    assert LedgerInSnapshot(4, 5, 500, 9, 1, 2, "", b"{}").offset_of(0) == -1        # record not migrated
    assert LedgerInSnapshot(4, 5, 500, 9, 1, 2, "", b"{}", first_offset=7).offset_of(0) == 7
    columns = ["entry_id", "offset", "batch_index"]
    old = pa.record_batch([pa.array([1, 2], pa.int64()), pa.array([-1, -1], pa.int32())],
                          names=["entry_id", "batch_index"])
    batch = _conform(_with_nulls(old, columns, ["offset"]))
    assert batch.schema == pa.schema([MESSAGE_ONLY_SCHEMA.field(c) for c in columns])
    assert batch.column("offset").to_pylist() == [None, None]

