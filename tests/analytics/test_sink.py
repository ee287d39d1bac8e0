"""The `strata` Spark sink (issue 13 items 4 and 8): `df.write` / `df.writeStream` with
`format("strata")` against a real standalone (no S3) and the session's real SparkSession
(`local[2,4]`: a failed task is retried up to three times). Results are read back with the
official pulsar client (a Reader from the earliest message), never with the Spark source.

What must hold:
- a batch write stores every row once with its value, key, properties and event time, on the
  row's topic (a partitioned one routed by key as the Java client does);
- ★ a task whose Python worker dies mid-write (os._exit after k rows, attempt 0) is retried by
  Spark and the topic holds every row exactly once, in row order per Spark partition;
- a retry that connects while a dead attempt's batches are still being stored (its bookie
  frozen) fails instead of losing a batch's tail, and the next attempt resumes after them;
- a streaming query whose micro-batch fails for good after storing part of its rows, then
  restarted from its checkpoint, replays that batch and the topic holds every row exactly once;
- a topic without deduplication is refused (SinkNotExactlyOnce) before any row is written,
  unless exactlyOnce=false;
- bad options and columns are BadSourceOption before any work starts.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from analytics.sink import TaskSender, java_string_hash, sink_settings
from common.errors import BadSourceOption, SinkSendFailed
from tests.support.namespaces import ensure_namespace
from tests.support.offload_checks import http
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess

NS = f"public/sink-{os.getpid()}"
EVENT_EPOCH_MS = 1_700_000_000_000
READ_TIMEOUT_MS = 5_000
READ_PATIENCE_S = 10.0
READ_IDLE_MS = 300
STREAM_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("sink") / "data") as standalone:
        ensure_namespace(standalone.admin_url, NS)
        status, body = http("POST", f"{standalone.admin_url}/admin/v2/namespaces/{NS}/deduplication", True)
        assert status == 204, (status, body)
        yield standalone


def topic(name: str) -> str:
    return f"persistent://{NS}/{name}"


def options(sa: StandaloneProcess, **extra: str) -> dict[str, str]:
    return {"service.url": sa.service_url, "admin.url": sa.admin_url, **extra}


def read_topic(sa: StandaloneProcess, name: str, expected: int = 0) -> list[Any]:
    """Every message of `name` (one partition or plain topic), earliest first. `has_message_available`
    alone can stop inside the last batch (the broker's last message id carries no batch index),
    so an idle reader also waits READ_IDLE_MS for one more message; below `expected` it keeps
    looking for up to READ_PATIENCE_S, so a slow broker is not taken for loss."""
    client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = client.create_reader(name, pulsar.MessageId.earliest)
        out: list[Any] = []
        deadline = time.monotonic() + READ_PATIENCE_S
        while True:
            if reader.has_message_available():
                out.append(reader.read_next(READ_TIMEOUT_MS))
                continue
            try:
                out.append(reader.read_next(READ_IDLE_MS))
                continue
            except pulsar.Timeout:
                pass
            if len(out) >= expected or time.monotonic() > deadline:
                return out
    finally:
        client.close()


def rows_df(spark: Any, n: int, partitions: int = 2) -> Any:
    """n deterministic rows in `partitions` Spark partitions (no shuffle: a retry sees the same rows)."""
    return (spark.range(0, n, 1, numPartitions=partitions)
            .select(F.concat(F.lit("m-"), F.col("id").cast("string")).cast("binary").alias("value"),
                    F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
                    F.create_map(F.lit("i"), F.col("id").cast("string")).alias("properties"),
                    F.timestamp_millis(F.lit(EVENT_EPOCH_MS) + F.col("id")).alias("event_time"),
                    F.col("id")))


def index_of(message: Any) -> int:
    return int(message.data().decode().removeprefix("m-").split("-")[-1])


def assert_exactly_once(messages: list[Any], expected: range) -> None:
    got = sorted(index_of(m) for m in messages)
    duplicates = sorted({i for i in got if got.count(i) > 1})
    missing = sorted(set(expected) - set(got))
    assert not duplicates and not missing and got == list(expected), (duplicates[:10], missing[:10], len(got))


def test_batch_write_stores_every_row_once_with_its_fields(spark: Any, sa: StandaloneProcess) -> None:
    plain, parted = topic("plain"), topic("parted")
    status, body = http("PUT", f"{sa.admin_url}/admin/v2/persistent/{NS}/parted/partitions", 2)
    assert status == 204, (status, body)
    n = 300
    df = rows_df(spark, n).select("value", F.col("key").alias("__key"), "properties", "event_time",
                                  F.when(F.col("id") % 3 == 0, F.lit(parted)).otherwise(F.lit(plain)).alias("topic"))
    df.write.format("strata").mode("append").options(**options(sa)).save()

    by_topic = {plain: read_topic(sa, plain, expected=n - n // 3)}
    per_partition = collections.Counter(java_string_hash(f"k{i % 7}") % 2 for i in range(0, n, 3))
    for p in range(2):
        by_topic[f"{parted}-partition-{p}"] = read_topic(sa, f"{parted}-partition-{p}", per_partition[p])
    everything = [m for ms in by_topic.values() for m in ms]
    assert_exactly_once(everything, range(n))
    for name, messages in by_topic.items():
        for m in messages:
            i = index_of(m)
            assert m.partition_key() == f"k{i % 7}"
            assert m.properties() == {"i": str(i)}
            assert m.event_timestamp() == EVENT_EPOCH_MS + i
            if name == plain:
                assert i % 3 != 0
            else:
                assert i % 3 == 0 and name.endswith(f"-{java_string_hash(m.partition_key()) % 2}"), (name, i)
        # per Spark partition (a producer), the rows are in row order
        for half in (range(0, n // 2), range(n // 2, n)):
            mine = [index_of(m) for m in messages if index_of(m) in half]
            assert mine == sorted(mine)


def failed_tasks_of(spark: Any, group: str) -> int:
    tracker = spark.sparkContext.statusTracker()
    total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            total += stage.numFailedTasks if stage else 0
    return total


def test_task_killed_mid_write_is_retried_without_duplicates_or_loss(spark: Any, sa: StandaloneProcess) -> None:
    """★ attempt 0 of each of the two tasks sends 150 rows (client batches of 10, so most of them
    are stored) then os._exit(1)s its Python worker, sends in flight or still batched in the
    client included; Spark retries both, and the retries resume after the broker's marks."""
    target, n = topic("crash"), 1_000
    group = f"sink-crash-{os.getpid()}"
    spark.sparkContext.setJobGroup(group, "sink crash test")
    try:
        (rows_df(spark, n).select("value", "key").write.format("strata").mode("append")
         .options(**options(sa, topic=target, **{"testing.failAfterRows": "150", "testing.failMode": "exit",
                                                  "batchingMaxMessages": "10", "batchingMaxPublishDelayMs": "1"}))
         .save())
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert failed_tasks_of(spark, group) >= 2, "the injected crash did not happen"
    messages = read_topic(sa, target, expected=n)
    assert_exactly_once(messages, range(n))
    for half in (range(0, n // 2), range(n // 2, n)):
        mine = [index_of(m) for m in messages if index_of(m) in half]
        assert mine == list(half)


DEAD_ATTEMPT = """
import os, sys, time
from analytics.sink import TaskSender, sink_settings
from pyspark.sql.types import BinaryType, StructField, StructType
service, admin, topic, name, n = sys.argv[1:6]
settings = sink_settings({"service.url": service, "admin.url": admin, "topic": topic, "batchingMaxMessages": "10"},
                         StructType([StructField("value", BinaryType())]), streaming=False)
sender = TaskSender(settings, name, 0, 0)
sender.send((b"m-0", None, None, None, None, topic))    # connected; row 0 stored
sender.finish()
print("ready", flush=True)
sys.stdin.readline()
for i in range(1, int(n)):
    sender.send((b"m-%d" % i, None, None, None, None, topic))
time.sleep(1.0)              # full batches of 10 go out at once; the broker cannot store them
os._exit(1)
"""


def children_of(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_a_retry_racing_a_dead_attempts_in_flight_writes_fails_then_resumes(sa: StandaloneProcess) -> None:
    """A dead attempt's batches are still being stored (its bookie is frozen) when the retry
    connects: the retry's SENDs are refused while they are in flight and answered as duplicates
    once they land, so the retry fails (SinkSendFailed) instead of losing its batch's tail, and
    the next attempt resumes after the new mark."""
    target, name, n = topic("race"), f"strata-sink-race-{os.getpid()}-0", 100
    settings = sink_settings(options(sa, topic=target, batchingMaxMessages="10", sendTimeoutMs="20000"),
                             StructType([StructField("value", BinaryType())]), streaming=False)
    dead = subprocess.Popen([sys.executable, "-c", DEAD_ATTEMPT, sa.service_url, sa.admin_url, target, name, str(n)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    bookies = children_of(sa.pid)
    assert bookies and dead.stdout is not None and dead.stdin is not None
    assert dead.stdout.readline().strip() == "ready"
    for pid in bookies:
        os.kill(pid, signal.SIGSTOP)
    try:
        dead.stdin.write("go\n")
        dead.stdin.flush()
        assert dead.wait(30) == 1
        threading.Timer(0.5, lambda: [os.kill(pid, signal.SIGCONT) for pid in bookies]).start()
        attempts = []
        for _ in range(2):
            sender = TaskSender(settings, name, 0, 0)
            try:
                for i in range(n):
                    sender.send((b"m-%d" % i, None, None, None, None, target))
                sender.finish()
                attempts.append(("ok", sender.rows_sent, sender.rows_skipped))
                break
            except SinkSendFailed as exc:
                attempts.append((str(exc), sender.rows_sent, sender.rows_skipped))
            finally:
                sender.close()
    finally:
        for pid in bookies:
            os.kill(pid, signal.SIGCONT)
    assert len(attempts) == 2 and "answered as a duplicate" in attempts[0][0], attempts
    assert attempts[1] == ("ok", 0, n), attempts           # the dead attempt had stored them all
    assert_exactly_once(read_topic(sa, target, n), range(n))


def write_json_file(directory: Path, file_index: int, rows: int) -> None:
    lines = [json.dumps({"value": f"m-{file_index * rows + r}", "key": f"k{r % 5}", "id": file_index * rows + r})
             for r in range(rows)]
    path = directory / f"part-{file_index:03d}.json"
    path.write_text("\n".join(lines) + "\n")
    stamp = 1_700_000_000 + file_index * 60              # the file source takes files oldest first
    os.utime(path, (stamp, stamp))


def run_stream(spark: Any, sa: StandaloneProcess, source: Path, checkpoint: Path, target: str,
               **extra: str) -> Any:
    schema = StructType([StructField("value", StringType()), StructField("key", StringType()),
                         StructField("id", LongType())])
    stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
              .select("value", "key"))
    return (stream.writeStream.format("strata").options(**options(sa, topic=target, **extra))
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())


def test_stream_restarted_from_checkpoint_replays_a_batch_exactly_once(spark: Any, sa: StandaloneProcess,
                                                                        tmp_path: Path) -> None:
    """Batch 1 fails on every attempt after storing 10 of its rows, so the query dies with batch 1
    planned but not committed; the restart replays batch 1 (its first 10 rows are not stored
    again), then runs batch 2 (a new batch id after a restart is not taken for a replay)."""
    target, rows = topic("stream"), 40
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    for f in range(3):
        write_json_file(source, f, rows)
    query = run_stream(spark, sa, source, checkpoint, target, **{
        "testing.failAfterRows": "10", "testing.failBatchId": "1", "testing.failAttempts": "99"})
    with pytest.raises(Exception, match="injected task failure"):
        query.awaitTermination(STREAM_TIMEOUT_S)
    assert_exactly_once(read_topic(sa, target, rows + 10), range(rows + 10))      # batch 0 and part of batch 1

    query = run_stream(spark, sa, source, checkpoint, target)        # replays batch 1, then batch 2
    assert query.awaitTermination(STREAM_TIMEOUT_S)
    assert query.exception() is None
    messages = read_topic(sa, target, 3 * rows)
    assert_exactly_once(messages, range(3 * rows))
    assert [index_of(m) for m in messages] == list(range(3 * rows))    # one task per file, in order


def test_topic_without_deduplication_is_refused_before_any_row(spark: Any, sa: StandaloneProcess) -> None:
    target = topic("nodedup")
    status, body = http("POST", f"{sa.admin_url}/admin/v2/persistent/{NS}/nodedup/deduplicationEnabled", False)
    assert status == 204, (status, body)
    df = rows_df(spark, 20, partitions=1).select("value")
    with pytest.raises(Exception, match=r"SinkNotExactlyOnce|deduplication is off"):
        df.write.format("strata").mode("append").options(**options(sa, topic=target)).save()
    assert read_topic(sa, target) == []
    # per-row topics are checked on the executor, before the first row goes to them
    with pytest.raises(Exception, match=r"SinkNotExactlyOnce|deduplication is off"):
        df.withColumn("topic", F.lit(target)).write.format("strata").mode("append").options(**options(sa)).save()
    assert read_topic(sa, target) == []
    # at-least-once on request
    df.write.format("strata").mode("append").options(**options(sa, topic=target, exactlyOnce="false")).save()
    assert_exactly_once(read_topic(sa, target, 20), range(20))


def test_bad_options_fail_before_any_work(spark: Any, sa: StandaloneProcess) -> None:
    df = rows_df(spark, 5).select("value")
    good = options(sa, topic=topic("bad"))
    for opts, match in [({**good, "startingOffsets": "earliest"}, "unknown sink option"),
                        ({k: v for k, v in good.items() if k != "service.url"}, "service.url is not set"),
                        ({k: v for k, v in good.items() if k != "topic"}, "no topic")]:
        with pytest.raises(Exception, match=match):
            df.write.format("strata").mode("append").options(**opts).save()
    assert read_topic(sa, topic("bad")) == []


def test_bad_columns_and_option_values_are_refused() -> None:
    base = {"service.url": "pulsar://127.0.0.1:1", "admin.url": "http://127.0.0.1:1", "topic": "t"}
    value = StructField("value", StringType())
    cases: list[tuple[dict[str, str], list[StructField], str]] = [
        (base, [value, StructField("ledger_id", LongType())], "not a sink column"),
        (base, [StructField("key", StringType())], "needs a value"),
        (base, [value, StructField("payload", StringType())], "both give"),
        (base, [value, StructField("event_time", StringType())], "event_time must be"),
        ({**base, "batchingMaxMessages": "many"}, [value], "must be an integer"),
        ({**base, "exactlyOnce": "maybe"}, [value], "true or false"),
        ({k: v for k, v in base.items() if k != "admin.url"}, [value], "needs admin.url"),
        ({**base, "topic": "a/b/c/d"}, [value], "not a valid topic"),
        ({**base, "testing.failMode": "explode"}, [value], "failMode"),
    ]
    env_saved = {k: os.environ.pop(k) for k in ("STRATA_ADMIN_URL", "STRATA_SERVICE_URL") if k in os.environ}
    try:
        for opts, fields, match in cases:
            with pytest.raises(BadSourceOption, match=match):
                sink_settings(opts, StructType(fields), streaming=False)
        with pytest.raises(BadSourceOption, match="sinkId is for batch"):
            sink_settings({**base, "sinkId": "x"}, StructType([value]), streaming=True)
    finally:
        os.environ.update(env_saved)


def test_java_string_hash_matches_java() -> None:
    # String.hashCode() & Integer.MAX_VALUE, from a JVM
    assert java_string_hash("") == 0
    assert java_string_hash("k1") == 3366
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == (-2147483648 & 0x7FFFFFFF)
    assert java_string_hash("é😀") == ((233 * 31 + 0xD83D) * 31 + 0xDE00) & 0x7FFFFFFF
