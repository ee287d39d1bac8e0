"""`strata analytics` end to end: a real standalone whose cold tier is the session's SeaweedFS,
messages from the official client, the `strata` Spark source.

- `summary` runs as a subprocess (`python -m cli.main analytics summary`, its own Spark, local[2])
  over a topic whose first ledgers are offloaded, so the read crosses from S3 to the bookies. Its
  table, PNG and Parquet must hold exactly what was produced: 300 messages, their payload bytes,
  the keys and producers with their counts, and a publish→event lag of about the 2 s the
  producer stamped.
- `consumer-lag` runs in-process on the session's SparkSession over a 2-partition topic where a
  Shared consumer received everything and acked two messages in three: per partition, the
  unacked count must be exactly what was left unacked, and every age must be positive.
- an unknown topic or subscription is one typed error (TopicNotFound, SubscriptionNotFound),
  also when it comes from Spark's Python workers as text (`failure_text`);
- examples/windowed_counts.py's aggregate moves counts from topic to topic once, also when re-run
  from its checkpoint;
- cluster flags win over the environment, which wins over the standalone data dir's defaults.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pulsar
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkException
from rich.console import Console

from cli import analytics_cmd
from common.errors import StrataError, SubscriptionNotFound, TopicNotFound
from tests.support.offload_checks import Admin, http
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess
from tests.support.waiting import wait_until

ROLLOVER_ENTRIES = 50
SUMMARY_MESSAGES = 300
EVENT_LAG_MS = 2_000
KEYS = ["k0", "k0", "k0", "k1", "k1", "k2"]   # message i gets KEYS[i % 6]: 150 k0, 100 k1, 50 k2
SUBPROCESS_TIMEOUT_S = 300
OFFLOAD_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory):
    bucket = s3_server.new_bucket()
    env = {**s3_server.standalone_env(bucket, prefix="analytics"),
           "STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
           "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}
    sa = StandaloneProcess.start(tmp_path_factory.mktemp("analytics") / "data", env=env)
    try:
        yield sa, bucket
    finally:
        sa.close()


def _access_flags(sa: StandaloneProcess, s3_server, bucket: str) -> list[str]:
    return ["--data-dir", str(sa.data_dir), "--admin-url", sa.admin_url, "--s3-endpoint", s3_server.endpoint,
            "--s3-bucket", bucket, "--s3-prefix", "analytics", "--s3-access-key", s3_server.access_key,
            "--s3-secret-key", s3_server.secret_key]


def _payload(i: int) -> bytes:
    return f"m{i:05d}".encode() + b"x" * (i % 7)


def _produce_summary_topic(sa: StandaloneProcess, topic: str) -> None:
    client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        # a durable subscription keeps the messages: with none, retention (0 by default) trims them
        client.subscribe(topic, "keep").close()
        producers = {name: client.create_producer(topic, producer_name=name, batching_enabled=False)
                     for name in ("alpha", "beta")}
        for i in range(SUMMARY_MESSAGES):
            producer = producers["alpha" if i < 200 else "beta"]
            producer.send(_payload(i), partition_key=KEYS[i % 6],
                          event_timestamp=int(time.time() * 1000) - EVENT_LAG_MS)
    finally:
        client.close()


def _offload_closed_ledgers(sa: StandaloneProcess, topic: str) -> int:
    admin = Admin(sa.admin_url)
    ledgers = admin.ledgers(topic)
    assert len(ledgers) >= 3, ledgers
    assert admin.offload(topic, ledgers[-1]["ledgerId"])[0] == 204
    status = admin.wait_offload_finished(topic, OFFLOAD_TIMEOUT_S)
    assert status["status"] == "SUCCESS", status
    return sum(1 for ledger in admin.ledgers(topic) if ledger["offloaded"])


def test_summary_of_a_topic_across_s3_and_bookies(cluster, s3_server, tmp_path: Path):
    from PIL import Image

    sa, bucket = cluster
    topic = f"persistent://public/default/summary-{os.getpid()}"
    _produce_summary_topic(sa, topic)
    assert _offload_closed_ledgers(sa, topic) >= 2
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "cli.main", "analytics", "summary", topic, "--master", "local[2]",
           "--top", "2", "--out", str(out), *_access_flags(sa, s3_server, bucket)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{topic}: 300 messages" in done.stdout, done.stdout
    assert "top keys" in done.stdout and "alpha" in done.stdout and "beta" in done.stdout

    hourly = pq.read_table(out / "hourly.parquet").to_pylist()
    assert sum(r["messages"] for r in hourly) == SUMMARY_MESSAGES
    assert sum(r["payload_bytes"] for r in hourly) == sum(len(_payload(i)) for i in range(SUMMARY_MESSAGES))
    keys = pq.read_table(out / "keys.parquet").to_pylist()
    assert [(r["key"], r["messages"]) for r in keys] == [("k0", 150), ("k1", 100)]
    producers = pq.read_table(out / "producers.parquet").to_pylist()
    assert [(r["producer_name"], r["messages"]) for r in producers] == [("alpha", 200), ("beta", 100)]
    (totals,) = pq.read_table(out / "totals.parquet").to_pylist()
    assert totals["messages_with_event_time"] == SUMMARY_MESSAGES
    assert EVENT_LAG_MS <= totals["event_lag_ms_p50"] < EVENT_LAG_MS + 30_000
    with Image.open(out / "summary.png") as image:
        assert image.format == "PNG" and image.size == (1200, 800)


def _produce_and_half_ack(sa: StandaloneProcess, topic: str, count: int) -> dict[int, int]:
    """Produce `count` messages over the partitions, receive them all on "sub" (Shared) and ack
    those with i % 3 != 0; returns the unacked count per partition."""
    client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    unacked: dict[int, int] = {0: 0, 1: 0}
    try:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False,
                                          message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
        for i in range(count):
            producer.send(f"{i}".encode(), partition_key=f"key-{i}")
        for _ in range(count):
            message = consumer.receive(15_000)
            if int(message.data()) % 3 == 0:
                unacked[message.message_id().partition()] += 1
            else:
                consumer.acknowledge(message)
        admin = Admin(sa.admin_url)

        def backlog_is(partition: int) -> bool:
            stats = admin.stats(f"{topic}-partition-{partition}")
            return stats["subscriptions"]["sub"]["msgBacklog"] == unacked[partition]

        wait_until(lambda: backlog_is(0) and backlog_is(1), 30, what="the acks to reach the broker")
        consumer.close()
    finally:
        client.close()
    return unacked


def test_consumer_lag_per_partition(cluster, s3_server, spark, tmp_path: Path):
    sa, bucket = cluster
    topic = f"persistent://public/default/lag-{os.getpid()}"
    assert http("PUT", Admin(sa.admin_url).topic_url(topic, "partitions"), 2)[0] == 204
    unacked = _produce_and_half_ack(sa, topic, 60)
    assert unacked[0] > 0 and unacked[1] > 0 and sum(unacked.values()) == 20
    out = tmp_path / "lag"
    args = analytics_cmd.parse_args(["consumer-lag", topic, "sub", "--out", str(out),
                                     *_access_flags(sa, s3_server, bucket)])
    console = Console(record=True, width=200)
    assert analytics_cmd.run(args, spark, console) == 0
    text = console.export_text()
    assert "subscription sub" in text and "20 unacked messages" in text, text

    partitions = pq.read_table(out / "partitions.parquet").to_pylist()
    assert {r["partition"]: r["unacked_messages"] for r in partitions} == unacked
    assert all(0 < r["newest_age_s"] <= r["oldest_age_s"] < 600 for r in partitions)
    buckets = pq.read_table(out / "buckets.parquet").to_pylist()
    assert sum(r["unacked_messages"] for r in buckets) == 20
    assert (out / "consumer-lag.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    with pytest.raises(SubscriptionNotFound):
        analytics_cmd.run(analytics_cmd.parse_args(["consumer-lag", topic, "nobody", "--out", str(out),
                                                    *_access_flags(sa, s3_server, bucket)]), spark, console)


def test_unknown_topic_is_one_clear_line(cluster, s3_server, spark, tmp_path: Path):
    sa, bucket = cluster
    topic = f"persistent://public/default/never-created-{os.getpid()}"
    args = analytics_cmd.parse_args(["summary", topic, "--out", str(tmp_path), *_access_flags(sa, s3_server, bucket)])
    # raised in the driver, or in a Python worker and then carried as text by PySpark's exception
    with pytest.raises((TopicNotFound, PySparkException)) as raised:
        analytics_cmd.run(args, spark, Console(record=True))
    text = analytics_cmd.failure_text(raised.value)
    assert text is not None and text.startswith("TopicNotFound: ") and topic in text, str(raised.value)[-2000:]
    with pytest.raises(TopicNotFound):
        analytics_cmd.run(analytics_cmd.parse_args(["consumer-lag", topic, "sub", "--out", str(tmp_path),
                                                    *_access_flags(sa, s3_server, bucket)]), spark, Console())
    # the command itself: one line, exit 1, and no Spark started for it (the admin API answers first)
    cmd = [sys.executable, "-m", "cli.main", "analytics", "consumer-lag", topic, "sub", "--out", str(tmp_path),
           *_access_flags(sa, s3_server, bucket)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("strata analytics: TopicNotFound: "), done.stderr
    assert "SparkContext" not in done.stderr and "Traceback" not in done.stderr


def _load_example() -> Any:
    path = REPO_ROOT / "examples" / "windowed_counts.py"
    spec = importlib.util.spec_from_file_location("windowed_counts_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_all(service_url: str, topic: str) -> list[pulsar.Message]:
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(15_000))
        return out
    finally:
        client.close()


def test_example_windowed_counts_topic_to_topic(cluster, s3_server, spark, tmp_path: Path):
    """examples/windowed_counts.py's aggregate, run here on the session's Spark: 10 messages of
    each of 3 keys, then one later message that moves the watermark past their windows; the
    counts arrive in the output topic once, also when the query is run again from its checkpoint."""
    sa, bucket = cluster
    example = _load_example()
    topic_in = f"persistent://public/default/clicks-{os.getpid()}"
    topic_out = f"persistent://public/default/clicks-counts-{os.getpid()}"
    client = pulsar.Client(sa.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        client.subscribe(topic_in, "keep").close()
        producer = client.create_producer(topic_in, batching_enabled=False)
        for i in range(30):
            producer.send(b"click", partition_key=f"k{i % 3}")
        time.sleep(3.5)                      # window 2 s + watermark 1 s: the next message closes them
        producer.send(b"late", partition_key="k0")
    finally:
        client.close()
    example.enable_dedup(sa.admin_url, topic_out)
    access = {**analytics_cmd.access_options(analytics_cmd.parse_args(
        ["summary", topic_in, *_access_flags(sa, s3_server, bucket)])), "service.url": sa.service_url}

    def run_once() -> None:
        messages = (spark.readStream.format("strata").option("topic", topic_in)
                    .option("startingOffsets", "earliest").options(**access).load())
        query = (example.windowed_counts(messages, 2, 1).writeStream.format("strata").outputMode("append")
                 .option("topic", topic_out).options(**access).option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(240), "the availableNow query did not finish"
        assert query.exception() is None

    run_once()
    first = _read_all(sa.service_url, topic_out)
    totals: dict[str, int] = {}
    for message in first:
        value = json.loads(message.data())
        assert message.partition_key() == value["key"] and message.properties()["window_end"] == value["window_end"]
        totals[value["key"]] = totals.get(value["key"], 0) + value["count"]
    assert totals == {"k0": 10, "k1": 10, "k2": 10}, [m.data() for m in first]
    run_once()
    assert [m.data() for m in _read_all(sa.service_url, topic_out)] == [m.data() for m in first]


def test_cluster_flags_then_environment_then_the_data_dir(tmp_path: Path):
    from analytics.access import ClusterAccess

    data = tmp_path / "data"
    (data / "s3").mkdir(parents=True)
    (data / "standalone.json").write_text(json.dumps({"bookie_ports": [1], "s3_ports": {"s3": 12345}}))
    (data / "s3" / "credentials.json").write_text(json.dumps({"access_key": "AK", "secret_key": "SK"}))
    args = analytics_cmd.parse_args(["summary", "t", "--data-dir", str(data), "--s3-bucket", "mine",
                                     "--option", "startingTime=5"])
    env = {"STRATA_ADMIN_URL": "http://broker:9090"}
    options = analytics_cmd.access_options(args, env)
    assert options == {"metadataUrl": f"sqlite:///{data.resolve() / 'metadata.db'}",
                       "s3.endpoint": "http://127.0.0.1:12345", "s3.bucket": "mine",
                       "s3.accessKey": "AK", "s3.secretKey": "SK", "startingTime": "5"}
    access = ClusterAccess.from_options({k: v for k, v in options.items() if k != "startingTime"}, env)
    assert access.admin_url == "http://broker:9090" and access.s3_prefix == "strata"
    bare = analytics_cmd.access_options(analytics_cmd.parse_args(["summary", "t", "--data-dir", str(tmp_path / "x")]),
                                        {})
    assert bare["admin.url"] == "http://127.0.0.1:8080" and "s3.endpoint" not in bare
    with pytest.raises(StrataError):
        analytics_cmd.access_options(analytics_cmd.parse_args(["summary", "t", "--option", "novalue"]), {})


def test_failure_text_finds_the_strata_error_in_a_worker_traceback():
    worker = Exception("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
                       '  File "analytics/read.py", line 97, in _read_cold\n'
                       "common.errors.DataLost: an offloaded ledger's object is gone from S3 (ledger_id=1)\n")
    assert analytics_cmd.failure_text(worker) == "DataLost: an offloaded ledger's object is gone from S3 (ledger_id=1)"
    assert analytics_cmd.failure_text(SubscriptionNotFound("no such subscription")) == \
        "SubscriptionNotFound: no such subscription"
    assert analytics_cmd.failure_text(ValueError("not ours")) is None
