"""`strata analytics`: Spark pipelines over a topic, through the `strata` source.

    strata analytics summary TOPIC [--top 10] [--out DIR] [--master local[*]]
    strata analytics consumer-lag TOPIC SUBSCRIPTION [--bucket-seconds N] [--out DIR]

`summary` prints messages and payload bytes per hour, the top keys, the producers and the
publish→event time lag (analytics.pipelines.summary) as tables, draws them in `summary.png` and
writes each table as Parquet (`hourly`, `keys`, `producers`, `lag`, `totals`.parquet) under
`--out` (default `./analytics-out/<tenant>.<ns>.<topic>/summary/`).

`consumer-lag` reads the subscription's ack state from the admin API (internalStats of each
partition), keeps the messages it has not acked and prints, per partition and per publish-time
bucket, how many there are and how old (analytics.pipelines.consumer_lag); `consumer-lag.png`,
`partitions.parquet` and `buckets.parquet` go under `--out` (default
`./analytics-out/<tenant>.<ns>.<topic>/consumer-lag-<subscription>/`).

How the cluster is reached: `--metadata-url`, `--admin-url`, `--service-url`, `--s3-endpoint`,
`--s3-region`, `--s3-bucket`, `--s3-prefix`, `--s3-access-key`, `--s3-secret-key` become the
source's options (analytics.access). A flag that is not given falls back to its environment
variable (STRATA_METADATA_URL, ...), then to the `make standalone` layout under `--data-dir`
(default ./data): metadata `sqlite:///<abs>/metadata.db`, the embedded S3 endpoint from
`standalone.json` and its credentials from `s3/credentials.json`, admin http://127.0.0.1:8080.
`--option KEY=VALUE` passes any other source option (startingTime, endingTime, ...).

Exit status: 0 done, 1 a Strata error (printed, e.g. unknown topic or subscription), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common.errors import StrataError
from common.topic_names import TopicName, parse_topic

DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
DEFAULT_OUT_ROOT = Path("analytics-out")
TABLE_ROWS_MAX = 60
TIME_COLUMNS = frozenset({"hour", "bucket_start", "first_publish_time", "last_publish_time"})

# flag dest -> (source option, environment variable that overrides the data-dir default)
ACCESS_FLAGS: dict[str, tuple[str, str]] = {
    "metadata_url": ("metadataUrl", "STRATA_METADATA_URL"),
    "admin_url": ("admin.url", "STRATA_ADMIN_URL"),
    "service_url": ("service.url", "STRATA_SERVICE_URL"),
    "s3_endpoint": ("s3.endpoint", "STRATA_OFFLOAD_S3_ENDPOINT"),
    "s3_region": ("s3.region", "STRATA_OFFLOAD_S3_REGION"),
    "s3_bucket": ("s3.bucket", "STRATA_OFFLOAD_S3_BUCKET"),
    "s3_prefix": ("s3.prefix", "STRATA_OFFLOAD_S3_PREFIX"),
    "s3_access_key": ("s3.accessKey", "AWS_ACCESS_KEY_ID"),
    "s3_secret_key": ("s3.secretKey", "AWS_SECRET_ACCESS_KEY"),
}


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument("--out", default=None, help="directory for the Parquet files and the PNG chart")
    parser.add_argument("--data-dir", default="./data",
                        help="a `strata standalone` data dir the cluster defaults are read from (default ./data)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="another option of the strata source (repeatable), e.g. startingTime=...")
    for dest, (option, variable) in ACCESS_FLAGS.items():
        parser.add_argument("--" + dest.replace("_", "-"), dest=dest, default=None,
                            help=f"source option {option} (else ${variable}, else the data dir's)")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata analytics", description="Spark pipelines over a topic")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="messages, bytes, keys, producers, event lag per hour")
    summary.add_argument("topic")
    summary.add_argument("--top", type=int, default=10, help="how many keys to list (default 10)")
    _add_common(summary)
    lag = commands.add_parser("consumer-lag", help="count and age of a subscription's unacked messages")
    lag.add_argument("topic")
    lag.add_argument("subscription")
    lag.add_argument("--bucket-seconds", type=int, default=None,
                     help="publish-time bucket width (default: picked so the backlog spans at most 60)")
    _add_common(lag)
    args = parser.parse_args(list(argv))
    if getattr(args, "top", 1) < 1 or (getattr(args, "bucket_seconds", None) or 1) < 1:
        parser.error("--top and --bucket-seconds must be positive")
    return args


def standalone_defaults(data_dir: Path) -> dict[str, str]:
    """The source options that reach a `strata standalone` running over `data_dir`."""
    root = data_dir.resolve()
    defaults = {"metadataUrl": f"sqlite:///{root / 'metadata.db'}", "admin.url": DEFAULT_ADMIN_URL}
    state_path, credentials_path = root / "standalone.json", root / "s3" / "credentials.json"
    try:
        if state_path.exists():
            ports = json.loads(state_path.read_text()).get("s3_ports") or {}
            if "s3" in ports:
                defaults["s3.endpoint"] = f"http://127.0.0.1:{int(ports['s3'])}"
        if credentials_path.exists():
            credentials = json.loads(credentials_path.read_text())
            defaults["s3.accessKey"] = str(credentials["access_key"])
            defaults["s3.secretKey"] = str(credentials["secret_key"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StrataError("unreadable standalone state in the data dir", data_dir=str(root), error=str(exc)) from exc
    return defaults


def access_options(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Flags first, then the environment (left to analytics.access), then the data dir's defaults."""
    env = os.environ if env is None else env
    defaults = standalone_defaults(Path(args.data_dir))
    options: dict[str, str] = {}
    for dest, (option, variable) in ACCESS_FLAGS.items():
        value = getattr(args, dest)
        if value:
            options[option] = value
        elif not env.get(variable) and option in defaults:
            options[option] = defaults[option]
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise StrataError("--option takes KEY=VALUE", given=item)
        options[key] = value
    return options


def out_dir(args: argparse.Namespace, topic: TopicName, leaf: str) -> Path:
    if args.out:
        path = Path(args.out)
    else:
        path = DEFAULT_OUT_ROOT / f"{topic.tenant}.{topic.namespace}.{topic.local}" / leaf
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_messages(spark: Any, topic: str, options: Mapping[str, str]) -> Any:
    return spark.read.format("strata").option("topic", topic).options(**options).load()


def write_parquet(tables: Mapping[str, Any], directory: Path) -> list[Path]:
    import pyarrow.parquet as pq

    paths = []
    for name, table in tables.items():
        path = directory / f"{name}.parquet"
        pq.write_table(table, path)
        paths.append(path)
    return paths


def run_summary(args: argparse.Namespace, spark: Any, console: Any) -> int:
    from analytics.pipelines import chart, summary

    topic = parse_topic(args.topic)
    report = summary.summarize(read_messages(spark, str(topic), access_options(args)), args.top)
    directory = out_dir(args, topic, "summary")
    png = chart.summary_chart(report, directory / "summary.png", title=str(topic))
    import pyarrow as pa

    written = write_parquet({"hourly": report.hourly, "keys": report.keys, "producers": report.producers,
                             "lag": report.lag, "totals": pa.Table.from_pylist([report.totals])}, directory)
    print_summary(console, str(topic), report)
    console.print(f"chart {png}")
    console.print("parquet " + " ".join(str(p) for p in written))
    return 0


def run_consumer_lag(args: argparse.Namespace, spark: Any, console: Any) -> int:
    from analytics.pipelines import chart, consumer_lag

    topic = parse_topic(args.topic)
    options = access_options(args)
    admin_url = options.get("admin.url") or os.environ.get("STRATA_ADMIN_URL") or DEFAULT_ADMIN_URL
    from analytics.access import ClusterAccess

    states = consumer_lag.fetch_ack_states(admin_url, str(topic), args.subscription,
                                           access=ClusterAccess.from_options(options))
    report = consumer_lag.backlog_report(read_messages(spark, str(topic), options), states, args.bucket_seconds)
    leaf = "consumer-lag-" + urllib.parse.quote(args.subscription, safe="")
    directory = out_dir(args, topic, leaf)
    png = chart.lag_chart(report, directory / "consumer-lag.png", title=f"{topic} / {args.subscription}")
    written = write_parquet({"partitions": report.partitions, "buckets": report.buckets}, directory)
    print_consumer_lag(console, str(topic), args.subscription, states, report)
    console.print(f"chart {png}")
    console.print("parquet " + " ".join(str(p) for p in written))
    return 0


def _cell(value: Any) -> str:
    """A table cell: times to the second (UTC), floats to 1 decimal, thousands separated, None as -."""
    import datetime

    if value is None:
        return "-"
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _table(title: str, rows: list[dict[str, Any]], columns: list[tuple[str, str]],
           none_labels: Mapping[str, str] | None = None) -> Any:
    """A rich table of `rows` (dicts) with (key, header) columns; at most TABLE_ROWS_MAX rows."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for key, header in columns:
        table.add_column(header, justify="left" if key in (none_labels or {}) else "right",
                         no_wrap=key in TIME_COLUMNS)
    for row in rows[:TABLE_ROWS_MAX]:
        cells = []
        for key, _ in columns:
            value = row.get(key)
            cells.append((none_labels or {}).get(key, "-") if value is None else _cell(value))
        table.add_row(*cells)
    if len(rows) > TABLE_ROWS_MAX:
        table.caption = f"first {TABLE_ROWS_MAX} of {len(rows)} rows (all in the Parquet file)"
    return table


LAG_COLUMNS = [("event_lag_ms_p50", "lag p50 ms"), ("event_lag_ms_p99", "lag p99 ms"),
               ("event_lag_ms_max", "lag max ms")]


def print_summary(console: Any, topic: str, report: Any) -> None:
    t = report.totals
    console.print(f"[bold]{topic}[/bold]: {_cell(t['messages'])} messages, {_cell(t['payload_bytes'])} payload bytes, "
                  f"{_cell(t['keys'])} keys, {_cell(t['producers'])} producers, "
                  f"{_plural(t['partitions'], 'partition')}, "
                  f"published {_cell(t['first_publish_time'])} .. {_cell(t['last_publish_time'])} UTC")
    lag_by_hour = {row["hour"]: row for row in report.lag.to_pylist()}
    hourly = [{**row, **lag_by_hour.get(row["hour"], {})} for row in report.hourly.to_pylist()]
    console.print(_table("per hour (UTC, publish time)", hourly,
                         [("hour", "hour"), ("messages", "messages"), ("payload_bytes", "payload bytes"),
                          ("keys", "keys"), ("producers", "producers"),
                          ("messages_with_event_time", "with event time"), *LAG_COLUMNS]))
    span = [("first_publish_time", "first publish"), ("last_publish_time", "last publish")]
    console.print(_table("top keys", report.keys.to_pylist(),
                         [("key", "key"), ("messages", "messages"), ("payload_bytes", "payload bytes"), *span],
                         {"key": "(no key)"}))
    console.print(_table("producers", report.producers.to_pylist(),
                         [("producer_name", "producer"), ("messages", "messages"),
                          ("payload_bytes", "payload bytes"), *span], {"producer_name": "(unnamed)"}))
    console.print(f"publish → event time lag over {_cell(t['messages_with_event_time'])} messages with an event "
                  f"time: p50 {_cell(t['event_lag_ms_p50'])} ms, p99 {_cell(t['event_lag_ms_p99'])} ms, "
                  f"max {_cell(t['event_lag_ms_max'])} ms")


def print_consumer_lag(console: Any, topic: str, subscription: str, states: list[Any], report: Any) -> None:
    import datetime

    marks = {s.partition: s for s in states}

    def position(value: tuple[int, int]) -> str:
        return f"{value[0]}:{value[1]}"

    partitions = [{**row, "mark_delete": position(marks[row["partition"]].mark_delete),
                   "last_confirmed": position(marks[row["partition"]].last_confirmed)}
                  for row in report.partitions.to_pylist()]
    now = datetime.datetime.fromtimestamp(report.now_ms / 1000, tz=datetime.UTC)
    console.print(f"[bold]{topic}[/bold] subscription [bold]{subscription}[/bold] at {_cell(now)} UTC: "
                  f"{_cell(sum(r['unacked_messages'] for r in partitions))} unacked messages")
    ages = [("oldest_age_s", "oldest age s"), ("newest_age_s", "newest age s")]
    console.print(_table("per partition", partitions,
                         [("partition", "partition"), ("mark_delete", "mark-delete"),
                          ("last_confirmed", "last confirmed"), ("unacked_messages", "unacked"),
                          ("unacked_payload_bytes", "payload bytes"), *ages, ("oldest_unacked", "oldest unacked")]))
    console.print(_table(f"unacked per {report.bucket_s} s of publish time (UTC)", report.buckets.to_pylist(),
                         [("partition", "partition"), ("bucket_start", "bucket start"),
                          ("unacked_messages", "unacked"), ("unacked_payload_bytes", "payload bytes"), *ages]))


def run(args: argparse.Namespace, spark: Any, console: Any) -> int:
    """One command on a SparkSession (the tests pass theirs) or a LazySession (`main`)."""
    if args.command == "summary":
        return run_summary(args, spark, console)
    return run_consumer_lag(args, spark, console)


_STRATA_ERROR_LINE = re.compile(r"^(?:common\.errors\.)?(?P<name>[A-Z]\w+): (?P<text>.*)$")


def failure_text(exc: BaseException) -> str | None:
    """`Name: message` of the Strata error behind `exc`: the exception itself, or the last
    `common.errors.X: ...` line of a Spark exception (the source runs in Python workers, so its
    StrataErrors reach the driver as text inside PySpark's exceptions); None if there is none."""
    if isinstance(exc, StrataError):
        return f"{type(exc).__name__}: {exc}"
    found = None
    for line in str(exc).splitlines():
        if line.strip().startswith("common.errors."):
            match = _STRATA_ERROR_LINE.match(line.strip())
            if match:
                found = f"{match.group('name')}: {match.group('text')}"
    return found


class LazySession:
    """The SparkSession `main` starts on first use (consumer-lag asks the admin API first, so a
    wrong subscription fails in a second, not after the JVM's start-up) and stops at the end."""

    def __init__(self, master: str, app_name: str) -> None:
        self.master = master
        self.app_name = app_name
        self.session: Any = None

    @property
    def read(self) -> Any:
        if self.session is None:
            from analytics.session import strata_session

            self.session = strata_session(self.master, app_name=self.app_name)
        return self.session.read

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.session = None


def main(argv: list[str]) -> int:
    from rich.console import Console

    args = parse_args(argv)
    console = Console(width=max(Console().width, 120))
    spark = LazySession(args.master, f"strata analytics {args.command}")
    try:
        return run(args, spark, console)
    except Exception as exc:  # StrataError, or PySpark's exceptions that carry one from a worker
        text = failure_text(exc)
        if text is None:
            raise
        print(f"strata analytics: {text}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
