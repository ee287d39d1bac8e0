"""A streaming pipeline, topic → windowed aggregate → topic, on Spark with the `strata` source and sink.

It counts the messages of each key per 10 s window of publish time and publishes one message per
closed window to another topic, exactly once (the sink's deduplication; the checkpoint keeps the
query's offsets and state across restarts):

    make standalone                                       # in another terminal (data in ./data)
    .venv/bin/python examples/windowed_counts.py --in clicks --out clicks-per-10s
    # produce keyed messages to `clicks`; read the counts with any Pulsar consumer, e.g.
    .venv/bin/python -c "import pulsar; r = pulsar.Client('pulsar://127.0.0.1:6650').create_reader(
        'clicks-per-10s', pulsar.MessageId.earliest); print(r.read_next(60_000).data())"

Each output message: key = the input key, value = JSON
`{"window_start": "...", "window_end": "...", "key": "...", "count": N}`, event_time = the window's
end, properties `window_start` / `window_end` (ISO 8601, UTC). A window is emitted once the
watermark (newest publish time seen − `--watermark-seconds`) passes its end, i.e. once later
messages arrive; `--available-now` processes what is in the topic and stops.

Exactly once needs the rows of a replayed micro-batch to come out in the same order (the sink
numbers them; analytics/sink.py "Where it does not hold"): the aggregation's state is kept in
RocksDB, whose store iterates in key order, so the windows a batch closes come out the same way
each time it runs. The output topic gets deduplication turned on (the sink refuses a topic
without it).

Cluster access defaults to `make standalone`'s ./data (cli/analytics_cmd.py `standalone_defaults`):
metadata store, embedded S3, admin http://127.0.0.1:8080; `--service-url` defaults to
pulsar://127.0.0.1:6650. Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from admin_client import AdminClient
from analytics.session import strata_session
from cli.analytics_cmd import standalone_defaults
from common.topic_names import parse_topic

ROCKSDB_STATE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
ADMIN_TIMEOUT_S = 10


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in", dest="topic_in", required=True, help="topic to read")
    parser.add_argument("--out", dest="topic_out", required=True, help="topic to publish the counts to")
    parser.add_argument("--checkpoint", default="./checkpoints/windowed-counts", help="checkpoint directory")
    parser.add_argument("--window-seconds", type=int, default=10)
    parser.add_argument("--watermark-seconds", type=int, default=5)
    parser.add_argument("--trigger-seconds", type=int, default=5, help="micro-batch interval")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest or latest (first run only)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--data-dir", default="./data", help="make standalone's data dir (cluster defaults)")
    parser.add_argument("--service-url", default="pulsar://127.0.0.1:6650")
    parser.add_argument("--admin-url", default=None, help="default: the data dir's (http://127.0.0.1:8080)")
    return parser.parse_args(argv)


def enable_dedup(admin_url: str, topic: str) -> None:
    """The sink's exactly-once needs the broker's deduplication on the output topic."""
    name = parse_topic(topic)
    admin = AdminClient(admin_url, timeout_s=ADMIN_TIMEOUT_S)      # admin_client: redirects, typed errors
    admin.call("POST", f"/admin/v2/persistent/{name.path}/deduplicationEnabled", True)


def windowed_counts(messages: Any, window_seconds: int, watermark_seconds: int) -> Any:
    """Messages per key per window of publish time, as rows the strata sink takes."""
    from pyspark.sql import functions as F

    counts = (messages.withWatermark("publish_time", f"{watermark_seconds} seconds")
              .groupBy(F.window("publish_time", f"{window_seconds} seconds"), F.col("key"))
              .count())
    start = F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    end = F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    value = F.to_json(F.struct(start.alias("window_start"), end.alias("window_end"), F.col("key"),
                               F.col("count")))
    return counts.select(F.col("key"), value.alias("value"), F.col("window.end").alias("event_time"),
                         F.create_map(F.lit("window_start"), start, F.lit("window_end"), end).alias("properties"))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    access = standalone_defaults(Path(args.data_dir))
    if args.admin_url:
        access["admin.url"] = args.admin_url
    access["service.url"] = args.service_url
    enable_dedup(access["admin.url"], args.topic_out)
    spark = strata_session(args.master, app_name="windowed-counts",
                           conf={"spark.sql.streaming.stateStore.providerClass": ROCKSDB_STATE})
    try:
        messages = (spark.readStream.format("strata").option("topic", args.topic_in)
                    .option("startingOffsets", args.starting_offsets).options(**access).load())
        writer = (windowed_counts(messages, args.window_seconds, args.watermark_seconds)
                  .writeStream.format("strata").outputMode("append").option("topic", args.topic_out)
                  .options(**access).option("checkpointLocation", args.checkpoint))
        if args.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
        query = writer.start()
        print(f"windowed-counts: {args.topic_in} -> {args.topic_out}, checkpoint {args.checkpoint}", flush=True)
        query.awaitTermination()
        progress = query.lastProgress or {}
        print(json.dumps({"batch": progress.get("batchId"), "input_rows": progress.get("numInputRows")}))
    except KeyboardInterrupt:
        pass
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
