"""`strata perf spark`: the `strata` Spark source against pyarrow and DuckDB reading the same
offloaded objects from S3 (what a user would pick instead), Spark's own Parquet reader on a
local copy as a second line, and the publish-to-visible time of a streaming query.

    strata perf spark [--messages 2000000] [--keys 1000] [--runs 3] [--stream-seconds 20] [--json]

With no arguments it starts, on free loopback ports in a temp dir, a SeaweedFS and a `strata
standalone` using it as the cold tier (perf.offload.stack: rollover at 1/8 of the payload bytes,
at least 1 MiB), and removes both after.

1. Fill: `--messages` messages of 1 KiB distinct random payloads, keyed `key-0000`..(`--keys`
   distinct keys, round robin), in client-side batches of 128 (the native client in a spawned
   process). Restart (every ledger closed), offload every ledger (admin REST, bounded wait),
   then drop the bookie copies (offloadDeletionLagMs 0), so every row can only come from S3.
2. A local copy: every object under the topic's prefix is downloaded into the temp dir.
3. Spark (`analytics.session.strata_session("local[2]")`), the same session for every reader:
   `count()` and a group-by-key (`count(*)`, `sum(length(payload))` per key) through
   `spark.read.parquet` on the local copy, through `spark.read.format("strata")` as loaded
   (every message column is shipped: PySpark's Python Data Source API has no column pruning),
   and through the source tuned as a user can: a schema naming only what the query needs
   (`ledger_id` for count, `key, payload` for the group-by: the source's column pruning) and
   `partitionBytes` = the objects' bytes / cores (one Spark partition per core: every Python
   source task pays ~0.1 s of start-up here). Each reader's first query runs once more to warm
   up (a Python source's first query starts the Python workers); then each query runs `--runs`
   times and the median counts.
4. The same group-by through pyarrow (a dataset on `pyarrow.fs.S3FileSystem`, batches of
   (key, payload length), Table.group_by) and DuckDB (the same S3 dataset, replacement scan;
   DuckDB's httpfs is not installed), straight from S3; one warm-up (the first pyarrow query),
   then `--runs` each, medians.
5. Streaming (skipped with `--stream-seconds 0`): `spark.readStream.format("strata")` on a
   fresh topic (admin.url given, so the open ledger's end is the broker's last confirmed
   entry), `trigger(processingTime="1 second")`, a foreachBatch that records, for every row,
   the time it is seen minus its publish time; a message is published every
   `--stream-interval-ms` for `--stream-seconds` once the query runs.

Figures: rows/s per engine and query. The main line is the group-by against the readers of the
same S3 objects: `ratio` = the source as loaded / pyarrow (target >= 0.7), `ratio_narrowed` =
the tuned source / pyarrow (target >= 0.9), `ratio_duckdb` and `ratio_narrowed_duckdb` the same
against DuckDB. The second line is Spark's Parquet reader on the local copy: `source_rows_per_s`
and `native_parquet_rows_per_s` are both queries together (2 x messages over the two medians
summed), `local_parquet_ratio` = source / native, `local_parquet_ratio_narrowed` the same for
the tuned source. The stream's p50/p99 in ms.
Every engine's group-by result must be what was published (counts and byte sums per key), and
every count() the messages published; otherwise the exit status is 1. The machine has few
cores, shared: the load average before and after is in the report.

What must hold: every wait is bounded (`--timeout-s`); everything started here (the S3 server,
the standalone, the SparkSession, the streaming query) is stopped and the temp dir removed, also
on error or Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from common.errors import StrataError, TimeoutExpired
from perf.harness import WorkerPool, install_sigterm_cleanup, print_report, throughput, worker_main

MESSAGE_BYTES = 1024
DEFAULT_MESSAGES = 2_000_000
DEFAULT_KEYS = 1000
SPARK_CORES = 2
SPARK_MASTER = f"local[{SPARK_CORES}]"
TARGET_RATIO = 0.7            # source as loaded / pyarrow from S3, group-by by key
TARGET_RATIO_NARROWED = 0.9   # the source with the query's columns / pyarrow
STREAM_TRIGGER = "1 second"
STREAM_WARMUP_KEY = "warmup"
STREAM_KEY = "measured"
PRUNED_COUNT_SCHEMA = "ledger_id bigint"          # count(): one narrow column
PRUNED_GROUP_SCHEMA = "key string, payload binary"  # the group-by's columns
KEEP_SUBSCRIPTION = "perf-spark-keep"  # its backlog keeps the ledgers from retention


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf spark", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES, help="1 KiB messages to offload")
    parser.add_argument("--keys", type=int, default=DEFAULT_KEYS, help="distinct message keys")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each query after one warm-up (median)")
    parser.add_argument("--stream-seconds", type=float, default=20.0,
                        help="how long the stream test publishes (0: no stream test)")
    parser.add_argument("--stream-interval-ms", type=float, default=50.0, help="one message every this many ms")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="bound on each phase")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="py-spy this process and its children (the Spark JVM, its Python workers) "
                             "during the source's timed group-by runs; raw stacks go to DIR")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------------
# The fill (a spawned worker process)


def run_keyed_fill(kw: dict, signal_ready: Callable[[], None], wait_start: Callable[[], None]) -> dict:
    """Worker body: kw["messages"] random payloads of kw["size"] bytes, keys round robin."""
    import uvloop
    return uvloop.run(_keyed_fill(kw, signal_ready, wait_start))


async def _keyed_fill(kw: dict, signal_ready: Callable[[], None], wait_start: Callable[[], None]) -> dict:
    from entries.batch import BatchMessage
    from perf.native_client import NativeClient, batch_sizes
    client = NativeClient(kw["service_url"])
    size, keys = kw["size"], [f"key-{k:04d}" for k in range(kw["keys"])]
    per_batch = batch_sizes(size)
    try:
        [producer] = await client.create_producers(kw["topic"], max_pending_messages=kw["max_pending"])
        signal_ready()
        await asyncio.get_running_loop().run_in_executor(None, wait_start)
        start_s = time.time()
        sent = 0
        while sent < kw["messages"]:
            count = min(per_batch, kw["messages"] - sent)
            block = os.urandom(count * size)
            batch = [BatchMessage(block[i * size:(i + 1) * size], partition_key=keys[(sent + i) % len(keys)])
                     for i in range(count)]
            await producer.send_batch(batch)
            sent += count
        await producer.flush()
        end_s = time.time()
        await producer.close()
    finally:
        await client.close()
    return {"messages": sent, "bytes": sent * size, "start_s": start_s, "end_s": end_s}


def fill(service_url: str, topic: str, messages: int, keys: int, timeout_s: float) -> dict:
    """Publish the topic's messages (a subscription at the start created first)."""
    from perf.offload import _create_subscriptions
    asyncio.run(_create_subscriptions(service_url, topic, [KEEP_SUBSCRIPTION]))  # retention keeps every ledger
    kw = {"service_url": service_url, "topic": topic, "messages": messages, "size": MESSAGE_BYTES,
          "keys": keys, "max_pending": 10_000}
    pool = WorkerPool(functools.partial(worker_main, run_keyed_fill), [kw], multiprocessing.get_context("spawn"))
    try:
        pool.launch()
        pool.go()
        results = pool.collect(timeout_s)
    finally:
        pool.terminate()
    sent, _, seconds = throughput(results, "messages")
    return {"fill_msgs_per_s": round(sent / seconds, 1), "fill_seconds": round(seconds, 3)}


# ------------------------------------------------------------------------------------------------
# Offload and the local copy


@contextlib.contextmanager
def cluster(args: argparse.Namespace) -> Iterator[Any]:
    """perf.offload's stack (SeaweedFS + a standalone on it) sized for this many messages."""
    from perf.offload import stack
    with stack(args.messages * MESSAGE_BYTES) as st:
        yield st


def offload_all(st: Any, topic: str, timeout_s: float) -> dict:
    """Every ledger closed (restart), offloaded, and its bookie copy deleted."""
    from perf.offload import drop_bookie_copies, offload
    sa = st.standalone
    sa.restart()
    result = offload(sa.admin_url, topic, timeout_s)
    if result.entries != result.total_entries:
        raise StrataError("not every entry was offloaded", offloaded=result.entries, total=result.total_entries)
    drop_s = drop_bookie_copies(sa.admin_url, sa.data_dir, sorted(result.ledgers), timeout_s)
    return {"offload_seconds": round(result.seconds, 3), "ledgers": len(result.ledgers),
            "bookie_bytes": sum(result.ledgers.values()), "bookie_copies_dropped_s": round(drop_s, 3)}


def topic_key_prefix(st: Any, topic: str) -> str:
    from offload.keys import topic_prefix
    from perf.offload import ml_name
    return str(topic_prefix(st.config.offload_s3_prefix, ml_name(topic)))


def download(st: Any, key_prefix: str, local_dir: Path) -> dict:
    """Every object under `key_prefix` into `local_dir` (same file names); objects and bytes."""
    client = st.s3.client()
    local_dir.mkdir(parents=True, exist_ok=True)
    objects = total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=st.s3.bucket, Prefix=key_prefix):
        for item in page.get("Contents", []):
            client.download_file(st.s3.bucket, item["Key"], str(local_dir / Path(item["Key"]).name))
            objects += 1
            total += item["Size"]
    if not objects:
        raise StrataError("no offloaded objects under the topic's prefix", prefix=key_prefix)
    return {"objects": objects, "s3_bytes": total}


# ------------------------------------------------------------------------------------------------
# Timing and results


def timed(fn: Callable[[], Any], runs: int, warm_up: bool = True) -> tuple[list[float], Any]:
    """One warm-up call (unless warm_up is False), then `runs` timed calls; (seconds of each
    timed call, the last result)."""
    result = fn() if warm_up else None
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - start)
    return seconds, result


def groups_of(rows: Any) -> dict[str, tuple[int, int]]:
    """(key, count, bytes) rows of any engine -> {key: (count, bytes)}."""
    return {str(key): (int(count), int(total)) for key, count, total in rows}


def check_groups(name: str, groups: dict[str, tuple[int, int]], expected: dict[str, tuple[int, int]]) -> None:
    if groups != expected:
        wrong = sorted(k for k in set(groups) | set(expected) if groups.get(k) != expected.get(k))
        raise StrataError("group-by results differ between engines", engine=name, keys=wrong[:5],
                          got=[groups.get(k) for k in wrong[:5]], expected=[expected.get(k) for k in wrong[:5]])


def expected_groups(messages: int, keys: int) -> dict[str, tuple[int, int]]:
    """What the fill wrote: message i has key i % keys and MESSAGE_BYTES of payload."""
    out = {}
    for k in range(min(keys, messages)):
        count = messages // keys + (1 if k < messages % keys else 0)
        out[f"key-{k:04d}"] = (count, count * MESSAGE_BYTES)
    return out


def _median(seconds: list[float]) -> float:
    return float(statistics.median(seconds))


# ------------------------------------------------------------------------------------------------
# Spark: the source and the native Parquet reader


def source_options(st: Any, topic: str) -> dict[str, str]:
    """The `strata` source's options for this cluster (what a user passes)."""
    creds = st.s3.credentials
    return {"topic": topic, "metadataUrl": st.standalone.metadata_url, "s3.endpoint": st.s3.endpoint,
            "s3.region": st.s3.region, "s3.bucket": st.s3.bucket, "s3.prefix": st.config.offload_s3_prefix,
            "s3.accessKey": creds.access_key, "s3.secretKey": creds.secret_key}


def spark_engine(name: str, count_df: Any, group_df: Any, args: argparse.Namespace, expected: dict,
                 profile: str | None = None) -> dict:
    """count() of `count_df` and the group-by of `group_df`: the first query warms up once (a
    Python source's first query starts the Python workers), then each runs `--runs` times."""
    from pyspark.sql import functions as F

    from perf.offload import profiled
    count_s, counted = timed(count_df.count, args.runs)
    if counted != args.messages:
        raise StrataError("count() is not the messages published", engine=name, count=counted,
                          messages=args.messages)

    def group_by() -> Any:
        return group_df.groupBy("key").agg(F.count("*"), F.sum(F.length("payload"))).collect()
    with profiled(os.getpid(), profile, f"{name}_groupby") as found:
        group_s, rows = timed(group_by, args.runs, warm_up=False)
    check_groups(name, groups_of(rows), expected)
    return {"count_s": count_s, "groupby_s": group_s, "profile": found.get("top")}


def tuned_partition_bytes(s3_bytes: int) -> int:
    """partitionBytes that gives about one Spark partition per core (each Python source task
    costs ~0.1 s of start-up on this box; Spark's own reader needs no such tuning)."""
    return max(1, -(-s3_bytes // SPARK_CORES))


def spark_figures(spark: Any, st: Any, topic: str, local_dir: Path, s3_bytes: int, args: argparse.Namespace,
                  expected: dict) -> dict:
    """Native Parquet first (it also warms the JVM), then the source as loaded (every message
    column shipped: the Python Data Source API has no column pruning), then the source tuned
    (a schema of the query's columns, one partition per core)."""
    native_df = spark.read.parquet(str(local_dir))
    native = spark_engine("native_parquet", native_df, native_df, args, expected)
    options = source_options(st, topic)

    def strata(schema: str | None = None, partition_bytes: int | None = None) -> Any:
        reader = spark.read.format("strata").options(**options)
        if partition_bytes is not None:
            reader = reader.option("partitionBytes", str(partition_bytes))
        return (reader if schema is None else reader.schema(schema)).load()
    source_df = strata()
    source = spark_engine("source", source_df, source_df, args, expected, args.profile)
    tuned_bytes = tuned_partition_bytes(s3_bytes)
    tuned = spark_engine("source_tuned", strata(PRUNED_COUNT_SCHEMA, tuned_bytes),
                         strata(PRUNED_GROUP_SCHEMA, tuned_bytes), args, expected, args.profile)
    return {"native": native, "source": source, "source_tuned": tuned, "tuned_partition_bytes": tuned_bytes,
            "source_partitions": source_df.rdd.getNumPartitions(),
            "native_partitions": native_df.rdd.getNumPartitions()}


# ------------------------------------------------------------------------------------------------
# pyarrow and DuckDB straight from S3


def s3_dataset(st: Any, key_prefix: str) -> Any:
    import pyarrow.dataset as ds
    from pyarrow import fs
    creds = st.s3.credentials
    scheme, _, host = st.s3.endpoint.partition("://")
    s3fs = fs.S3FileSystem(access_key=creds.access_key, secret_key=creds.secret_key, region=st.s3.region,
                           endpoint_override=host, scheme=scheme)
    return ds.dataset(f"{st.s3.bucket}/{key_prefix}", filesystem=s3fs, format="parquet")


def pyarrow_group_by(dataset: Any) -> list[tuple[str, int, int]]:
    """count and payload bytes per key: batches of (key, payload length), then Table.group_by."""
    import pyarrow as pa
    import pyarrow.compute as pc
    parts = [pa.table({"key": batch.column("key"), "n": pc.binary_length(batch.column("payload"))})
             for batch in dataset.to_batches(columns=["key", "payload"])]
    table = pa.concat_tables(parts).group_by("key").aggregate([("n", "count"), ("n", "sum")])
    return list(zip(table.column("key").to_pylist(), table.column("n_count").to_pylist(),
                    table.column("n_sum").to_pylist(), strict=True))


def duckdb_group_by(dataset: Any) -> list[tuple[str, int, int]]:
    import duckdb
    con = duckdb.connect()
    try:
        con.register("messages", dataset)
        return [tuple(row) for row in con.execute(
            "select key, count(*), sum(octet_length(payload)) from messages group by key").fetchall()]
    finally:
        con.close()


def s3_engines(st: Any, key_prefix: str, args: argparse.Namespace, expected: dict) -> dict:
    dataset = s3_dataset(st, key_prefix)
    out = {}
    for name, fn in (("pyarrow", pyarrow_group_by), ("duckdb", duckdb_group_by)):
        seconds, rows = timed(functools.partial(fn, dataset), args.runs, warm_up=name == "pyarrow")
        check_groups(name, groups_of(rows), expected)
        out[name] = seconds
    return out


# ------------------------------------------------------------------------------------------------
# Streaming: publish -> visible in a 1 s micro-batch query


class Seen:
    """Rows a foreachBatch has seen: key -> list of (seen - publish) ms. Thread-safe (py4j's
    callback threads call it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency_ms: dict[str, list[float]] = {}
        self.batches = 0

    def on_batch(self, df: Any, batch_id: int) -> None:
        rows = df.selectExpr("key", "unix_millis(publish_time) as t").collect()
        now_ms = time.time() * 1000.0
        with self.lock:
            self.batches += 1
            for key, publish_ms in rows:
                self.latency_ms.setdefault(key, []).append(now_ms - publish_ms)

    def count(self, key: str) -> int:
        with self.lock:
            return len(self.latency_ms.get(key, []))


def wait_seen(seen: Seen, key: str, count: int, timeout_s: float, query: Any) -> None:
    deadline = time.monotonic() + timeout_s
    while seen.count(key) < count:
        if query.exception() is not None:
            raise StrataError("the streaming query failed", error=str(query.exception())[:2000])
        if time.monotonic() > deadline:
            raise TimeoutExpired("the streaming query did not see the messages", key=key, seen=seen.count(key),
                                 expected=count, timeout_s=timeout_s)
        time.sleep(0.05)


async def publish(service_url: str, topic: str, key: str, count: int, interval_s: float) -> int:
    """`count` messages of `key`, one every `interval_s` (paced on the clock, not on receipts)."""
    from entries.batch import BatchMessage
    from perf.native_client import NativeClient
    client = NativeClient(service_url)
    try:
        [producer] = await client.create_producers(topic)
        start = time.monotonic()
        for i in range(count):
            await asyncio.sleep(max(0.0, start + i * interval_s - time.monotonic()))
            await producer.send_batch([BatchMessage(os.urandom(MESSAGE_BYTES), partition_key=key)])
        await producer.flush()
        await producer.close()
    finally:
        await client.close()
    return count


def stream_latency(spark: Any, st: Any, checkpoint_dir: Path, args: argparse.Namespace) -> dict:
    """The module docstring's step 5: p50/p99 of seen - publish time, in ms."""
    sa = st.standalone
    topic = f"persistent://public/default/perf-spark-stream-{uuid.uuid4().hex[:8]}"
    asyncio.run(publish(sa.service_url, topic, STREAM_WARMUP_KEY, 1, 0.0))  # the topic exists
    options = {**source_options(st, topic), "admin.url": sa.admin_url, "startingOffsets": "earliest"}
    seen = Seen()
    query = (spark.readStream.format("strata").options(**options).load()
             .writeStream.foreachBatch(seen.on_batch).trigger(processingTime=STREAM_TRIGGER)
             .option("checkpointLocation", str(checkpoint_dir)).start())
    try:
        wait_seen(seen, STREAM_WARMUP_KEY, 1, args.timeout_s, query)  # the Python workers are up
        count = max(1, int(args.stream_seconds * 1000 / args.stream_interval_ms))
        asyncio.run(publish(sa.service_url, topic, STREAM_KEY, count, args.stream_interval_ms / 1000))
        wait_seen(seen, STREAM_KEY, count, args.timeout_s, query)
    finally:
        query.stop()
    latencies = sorted(seen.latency_ms[STREAM_KEY])
    if len(latencies) != count:
        raise StrataError("the streaming query saw a message more than once", seen=len(latencies), published=count)
    return {"stream_visible_p50_ms": round(_percentile(latencies, 0.50), 1),
            "stream_visible_p99_ms": round(_percentile(latencies, 0.99), 1),
            "stream_visible_max_ms": round(latencies[-1], 1),
            "stream_messages": count, "stream_batches": seen.batches}


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# ------------------------------------------------------------------------------------------------
# The run


@contextlib.contextmanager
def spark_session() -> Iterator[Any]:
    from analytics.session import strata_session
    spark = strata_session(SPARK_MASTER, app_name="strata-perf-spark")
    try:
        yield spark
    finally:
        spark.stop()


@contextlib.contextmanager
def phase(phases: dict[str, float], name: str) -> Iterator[None]:
    """Wall seconds of a phase into `phases` (where a run's time goes)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = round(time.perf_counter() - start, 1)


def measure(st: Any, work: Path, args: argparse.Namespace) -> dict:
    sa = st.standalone
    topic = f"persistent://public/default/perf-spark-{uuid.uuid4().hex[:8]}"
    phases: dict[str, float] = {}
    out: dict[str, Any] = {"phase_seconds": phases}
    with phase(phases, "fill"):
        out["fill"] = fill(sa.service_url, topic, args.messages, args.keys, args.timeout_s)
    with phase(phases, "offload"):
        out["offload"] = offload_all(st, topic, args.timeout_s)
    key_prefix = topic_key_prefix(st, topic)
    with phase(phases, "copy"):
        out["copy"] = download(st, key_prefix, work / "local")
    expected = expected_groups(args.messages, args.keys)
    with phase(phases, "pyarrow_duckdb"):
        out["s3_engines"] = s3_engines(st, key_prefix, args, expected)
    with contextlib.ExitStack() as stack:
        with phase(phases, "spark_start"):
            spark = stack.enter_context(spark_session())
        with phase(phases, "spark_batch"):
            out["spark"] = spark_figures(spark, st, topic, work / "local", out["copy"]["s3_bytes"], args, expected)
        with phase(phases, "stream"):
            out["stream"] = stream_latency(spark, st, work / "checkpoint", args) if args.stream_seconds else {}
    return out


def _rate(rows: int, seconds: float) -> float:
    return round(rows / seconds, 1) if seconds > 0 else 0.0


def _engine_figures(name: str, runs: dict, messages: int) -> dict:
    return {f"{name}_count_rows_per_s": _rate(messages, _median(runs["count_s"])),
            f"{name}_groupby_rows_per_s": _rate(messages, _median(runs["groupby_s"]))}


def _both_s(runs: dict) -> float:
    """Seconds of count + group-by (medians)."""
    return _median(runs["count_s"]) + _median(runs["groupby_s"])


def s3_ratios(sp: dict, s3: dict, messages: int) -> dict:
    """The main line: the source's group-by (as loaded, and narrowed + one partition per core)
    against pyarrow and DuckDB reading the same S3 objects, in the same run."""
    source = _rate(messages, _median(sp["source"]["groupby_s"]))
    narrowed = _rate(messages, _median(sp["source_tuned"]["groupby_s"]))
    pyarrow = _rate(messages, _median(s3["pyarrow"]))
    duckdb = _rate(messages, _median(s3["duckdb"]))
    out = {"source_groupby_rows_per_s": source, "source_narrowed_groupby_rows_per_s": narrowed,
           "pyarrow_rows_per_s": pyarrow, "duckdb_rows_per_s": duckdb,
           "ratio": round(source / pyarrow, 3), "ratio_narrowed": round(narrowed / pyarrow, 3),
           "ratio_duckdb": round(source / duckdb, 3), "ratio_narrowed_duckdb": round(narrowed / duckdb, 3),
           "target_ratio": TARGET_RATIO, "target_ratio_narrowed": TARGET_RATIO_NARROWED}
    out["target_met"] = out["ratio"] >= TARGET_RATIO and out["ratio_narrowed"] >= TARGET_RATIO_NARROWED
    return out


def report(args: argparse.Namespace, m: dict) -> dict:
    n = args.messages
    sp = m["spark"]
    src, nat, tuned = sp["source"], sp["native"], sp["source_tuned"]
    result: dict[str, Any] = {
        **s3_ratios(sp, m["s3_engines"], n),
        "source_rows_per_s": _rate(2 * n, _both_s(src)),
        "native_parquet_rows_per_s": _rate(2 * n, _both_s(nat)),
        "local_parquet_ratio": round(_both_s(nat) / _both_s(src), 3),
        **m["stream"],
        "source_tuned_rows_per_s": _rate(2 * n, _both_s(tuned)),
        "local_parquet_ratio_narrowed": round(_both_s(nat) / _both_s(tuned), 3),
    }
    for name, runs in (("source", src), ("source_tuned", tuned), ("native_parquet", nat)):
        result.update(_engine_figures(name, runs, n))
        if name != "native_parquet":
            result[f"{name}_count_ratio"] = round(_median(nat["count_s"]) / _median(runs["count_s"]), 3)
            result[f"{name}_groupby_ratio"] = round(_median(nat["groupby_s"]) / _median(runs["groupby_s"]), 3)
    seconds = {f"{name}_{query}": _round_all(runs[f"{query}_s"]) for name, runs in
               (("source", src), ("source_tuned", tuned), ("native", nat)) for query in ("count", "groupby")}
    seconds.update({f"{name}_groupby": _round_all(m["s3_engines"][name]) for name in ("pyarrow", "duckdb")})
    result.update({
        "messages": n, "message_bytes": MESSAGE_BYTES, "keys": args.keys, "runs": args.runs,
        "payload_bytes": n * MESSAGE_BYTES, **m["copy"], **m["offload"], **m["fill"],
        "source_partitions": sp["source_partitions"], "native_partitions": sp["native_partitions"],
        "tuned_options": {"count_schema": PRUNED_COUNT_SCHEMA, "groupby_schema": PRUNED_GROUP_SCHEMA,
                          "partitionBytes": sp["tuned_partition_bytes"]},
        "seconds": seconds, "spark_master": SPARK_MASTER, "phase_seconds": m["phase_seconds"],
    })
    if args.profile:
        result["profile_source_groupby_top"] = src["profile"]
        result["profile_source_narrowed_groupby_top"] = tuned["profile"]
    return result


def _round_all(seconds: list[float]) -> list[float]:
    return [round(s, 3) for s in seconds]


def run(args: argparse.Namespace) -> dict:
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="strata-perf-spark-"))
    try:
        with cluster(args) as st:
            result = report(args, measure(st, work, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_avg_1m"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    result["cpus"] = os.cpu_count()
    return result


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    install_sigterm_cleanup()
    if args.messages < 1 or args.keys < 1 or args.runs < 1 or args.timeout_s <= 0 \
            or args.stream_seconds < 0 or args.stream_interval_ms <= 0:
        print("strata perf spark: --messages, --keys, --runs must be >= 1; times > 0 (--stream-seconds >= 0)",
              file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"strata perf spark: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context managers stopped everything
        print("strata perf spark: interrupted", file=sys.stderr)
        return 130
    print_report("strata perf spark", result, args.json)
    return 0
