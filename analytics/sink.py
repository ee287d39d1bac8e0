"""The `strata` Spark sink: `df.write.format("strata")` and `df.writeStream.format("strata")`.
Rows become Pulsar messages, batched, stored EXACTLY ONCE across task retries and query restarts.

    df.select("value", "key").write.format("strata").mode("append") \\
        .option("service.url", "pulsar://h:6650").option("admin.url", "http://h:8080") \\
        .option("topic", "persistent://t/ns/out").save()
    df.writeStream.format("strata").option("topic", "out") \\
        .option("checkpointLocation", "/ckpt").start()

Columns (matched case-insensitively; ours first, then the Pulsar connector's where it has one):
- `value` or `payload` (binary or string, UTF-8): the payload. Required. Null → a null-value
  message (Pulsar's tombstone).
- `key` / `__key` (string, or binary holding UTF-8): the partition key. `ordering_key` (same types).
- `properties` / `__messageProperties` (map<string,string>).
- `event_time` / `__eventTime` (timestamp, or long/int milliseconds since the epoch; null or
  not after the epoch → no event time).
- `topic` / `__topic` (string): the row's topic. The `topic` option, when set, applies to every
  row and overrides the column (as Kafka's and Pulsar's sinks do). Neither → BadSourceOption.
Any other column is refused (BadSourceOption naming it): select the columns to send. Rows of a
partitioned topic go to partition `java_string_hash(key) % n` (the Java client's default
routing), keyless rows round-robin in row order.

Options: `topic`; `service.url`, `admin.url` (and the other access options, analytics.access,
with their environment fallbacks: credentials and the TLS trust file go to the pulsar.Client and
the admin calls); `exactlyOnce` (default true; false = at-least-once, no
check); `sinkId` (batch writes only: a stable id makes re-running the same job idempotent);
`maxPendingMessages` (1000: the bound on sends awaiting the broker, per task),
`batchingMaxMessages` (1000), `batchingMaxBytes` (131072), `batchingMaxPublishDelayMs` (10),
`sendTimeoutMs` (30000). `testing.fail*` inject a task failure for tests (see `Faults`).
Anything else → BadSourceOption, raised in the writer's constructor, before any task runs.
Batch writes take `mode("append")` (Spark refuses its default, ErrorIfExists, for Python data
sources); `SinkWriter(..., overwrite=True)` is refused: a topic is append-only.

How exactly-once holds
- Deduplication: the broker keeps, per topic and producer name, the highest sequence id it
  stored (its "mark"; broker/topics/dedup.py), answers a SEND whose first sequence id is at or below
  it as a duplicate (receipt (-1, -1), nothing stored), and hands the mark to a producer that
  (re)connects under that name as `last_sequence_id`. The constructor (driver side) checks, over
  the admin API, that deduplication is on for the `topic` option's topic and raises
  SinkNotExactlyOnce if not (also when the sink's role may not read that policy: on a secured
  cluster a tenant admin's credentials may, a produce-only role writes with exactlyOnce=false);
  topics given per row are checked on the executor before the first row goes to them (rows
  already sent by that task to other topics stay).
- Producer name = `strata-sink-{write id}-{Spark partition id}`, the same on every topic it
  writes. Write id: batch writes, `sinkId` or a fresh uuid per write job, made in the driver
  and shipped inside the pickled writer, so every attempt of a task shares it. Streaming: the
  query id (the executor's local property `sql.streaming.queryId`), which Spark keeps in the
  checkpoint's `metadata` file: a restart from the checkpoint keeps it, a new checkpoint gets a
  new one. (A checkpoint path could be moved; a `sinkId` shared by two checkpoints would let
  the second's batch 0 be taken for the first's; so neither is used for streams.)
- Sequence id of a row = `batch id * 2**32 + k + 1`, k = the row's index among this task's
  rows going to that (partition) topic (0 would mean "unset" to the client). The batch id is
  0 for batch writes and the micro-batch id (local property `streaming.sql.batchId`) for
  streams, so sequence ids of a producer name rise strictly across micro-batches and are
  consecutive inside one (the broker's mark of a client batch, first id + count - 1, is then
  exact).
- A retried task, or a micro-batch replayed after a restart, recomputes the same rows with the
  same (name, sequence id) pairs. Each producer starts sending at its `last_sequence_id + 1`
  and skips the rows before: resuming there, rather than re-sending everything, keeps a client
  batch from straddling the mark (a batch is judged by its first id only, so a re-sent batch
  that begins below the mark but ends above it would be dropped whole and lose its tail).
  Rows of a dead attempt still in flight when the retry connects are caught by the broker: the
  retry's SEND is refused while they are in flight and answered as a duplicate once they land;
  a duplicate receipt for a row at or above the resume point fails the task (SinkSendFailed),
  and Spark's next attempt resumes from the new mark.
- Speculative attempts of one task take turns per topic: the broker lets one producer hold a
  name (ProducerBusy; the other waits up to PRODUCER_BUSY_WAIT_S, then fails) and the second
  resumes after the first's mark.
- The micro-batch commit needs nothing: the rows are stored when the tasks end.

Where it does not hold
- Rows must reach a task in the same order on every attempt: the source and the plan must
  be deterministic (files, the rate source, a Strata topic). After a shuffle without a total
  order, or with non-deterministic expressions (rand(), now()), a retry may number different
  rows with the same ids: rows are lost and others duplicated.
- Changing the query between restarts (its partitioning, its filters) has the same effect, and
  so has adding partitions to a target topic between a task's attempts (keys route anew).
- The broker keeps the marks of `broker_dedup_producers_max` names per topic (LRU); a name
  evicted before its task is retried loses its mark, and the retry re-sends what it stored.
- Turning deduplication off on the topic while the sink runs degrades it to at-least-once.
- It is not transactional: rows of a failed task are visible before its retry completes, and
  a batch write whose job fails for good leaves what its tasks stored (re-run it with the same
  `sinkId` to complete it without duplicates).

What must hold: the writer objects are plain picklable data; every wait is bounded (producer
creation, the send window, flush); at most `maxPendingMessages` sends await the broker per task.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from analytics.access import ACCESS_OPTIONS, ClusterAccess, lowered
from common.errors import (
    AdminForbidden,
    AdminUnauthorized,
    AnalyticsError,
    BadSourceOption,
    InvalidTopicName,
    SinkNotExactlyOnce,
    SinkSendFailed,
    StrataError,
)
from common.topic_names import parse_topic

log = logging.getLogger(__name__)

SEQUENCE_IDS_PER_BATCH = 1 << 32      # a (micro-)batch's sequence ids: batch * this + 1 + row index
ROWS_PER_BATCH_MAX = SEQUENCE_IDS_PER_BATCH - 1   # rows per producer and (micro-)batch
BATCH_ID_MAX = (1 << 31) - 1          # keeps sequence ids below 2**63
ADMIN_TIMEOUT_S = 10.0
PRODUCER_BUSY_WAIT_S = 30.0           # a dead attempt's producer may hold the name this long
PRODUCER_BUSY_PAUSE_S = 0.2
DRAIN_MARGIN_S = 10.0                 # beyond the send timeout, for the last callbacks
PRODUCER_NAME_PREFIX = "strata-sink"

# column name (lower-case) -> role
COLUMN_ROLES: dict[str, str] = {
    "value": "value", "payload": "value",
    "key": "key", "__key": "key",
    "ordering_key": "ordering_key",
    "properties": "properties", "__messageproperties": "properties",
    "event_time": "event_time", "__eventtime": "event_time",
    "topic": "topic", "__topic": "topic",
}
ROLE_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "value": (BinaryType, StringType),
    "key": (StringType, BinaryType),
    "ordering_key": (StringType, BinaryType),
    "properties": (MapType,),
    "event_time": (TimestampType, TimestampNTZType, LongType, IntegerType),
    "topic": (StringType,),
}
SINK_OPTIONS = frozenset({
    "topic", "exactlyonce", "sinkid", "maxpendingmessages", "batchingmaxmessages", "batchingmaxbytes",
    "batchingmaxpublishdelayms", "sendtimeoutms",
    "testing.failafterrows", "testing.failmode", "testing.failattempts", "testing.failbatchid",
})
SPARK_OPTIONS = frozenset({"checkpointlocation", "path"})   # Spark's own, passed along to the sink
FAIL_MODES = ("raise", "exit")


@dataclass(frozen=True)
class Faults:
    """Test-only fault injection (options `testing.*`): a task of a matching attempt fails once
    it has sent `after_rows` rows. mode "raise": flush, then raise (the task's cleanup runs);
    "exit": `os._exit(1)` the Python worker at once, sends in flight or still in the client's
    batch included. Only attempts numbered below `attempts` fail, and, if `batch_id` >= 0,
    only in that micro-batch."""

    after_rows: int = -1                  # -1: off
    mode: str = "raise"
    attempts: int = 1
    batch_id: int = -1

    def due(self, rows_sent: int, attempt: int, batch_id: int) -> bool:
        return (self.after_rows >= 0 and rows_sent == self.after_rows and attempt < self.attempts
                and self.batch_id in (-1, batch_id))


@dataclass(frozen=True)
class SinkSettings:
    access: ClusterAccess
    topic: str                            # "" = each row's `topic` column
    columns: tuple[tuple[str, str], ...]  # (role, column name)
    exactly_once: bool
    max_pending_messages: int
    batching_max_messages: int
    batching_max_bytes: int
    batching_max_publish_delay_ms: int
    send_timeout_ms: int
    faults: Faults


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task did: rows sent now, and rows an earlier attempt had stored (skipped)."""

    partition_id: int
    attempt: int
    rows_sent: int
    rows_skipped: int
    topics: tuple[str, ...]


# --- options and columns (driver side) -------------------------------------------------------

def _int_option(opts: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadSourceOption(f"{name} must be an integer", value=raw) from None
    if not low <= value <= high:
        raise BadSourceOption(f"{name} must be in {low}..{high}", value=value)
    return value


def _bool_option(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise BadSourceOption(f"{name} must be true or false", value=raw)
    return raw.strip().lower() == "true"


def column_roles(schema: StructType) -> tuple[tuple[str, str], ...]:
    """(role, column) for every column of `schema`; BadSourceOption for an unknown column, a
    role given twice, a column of the wrong type, or no value column."""
    roles: dict[str, str] = {}
    for field in schema.fields:
        role = COLUMN_ROLES.get(field.name.lower())
        if role is None:
            raise BadSourceOption(f"column {field.name!r} is not a sink column; select only value/payload, "
                                  "key/__key, ordering_key, properties/__messageProperties, "
                                  "event_time/__eventTime and topic/__topic", column=field.name)
        if role in roles:
            raise BadSourceOption(f"columns {roles[role]!r} and {field.name!r} both give the message's {role}")
        if not isinstance(field.dataType, ROLE_TYPES[role]) or (
                isinstance(field.dataType, MapType)
                and not (isinstance(field.dataType.keyType, StringType)
                         and isinstance(field.dataType.valueType, StringType))):
            allowed = ", ".join(t.typeName() for t in ROLE_TYPES[role])
            raise BadSourceOption(f"column {field.name!r} has type {field.dataType.simpleString()}; "
                                  f"its {role} must be {allowed}"
                                  + (" (map<string,string>)" if role == "properties" else ""))
        roles[role] = field.name
    if "value" not in roles:
        raise BadSourceOption("the sink needs a value (or payload) column")
    return tuple(sorted(roles.items()))


def _faults(opts: Mapping[str, str]) -> Faults:
    mode = opts.get("testing.failmode", "raise")
    if mode not in FAIL_MODES:
        raise BadSourceOption(f"testing.failMode must be one of {', '.join(FAIL_MODES)}", value=mode)
    return Faults(after_rows=_int_option(opts, "testing.failAfterRows", -1, -1, 1 << 40), mode=mode,
                  attempts=_int_option(opts, "testing.failAttempts", 1, 0, 1000),
                  batch_id=_int_option(opts, "testing.failBatchId", -1, -1, BATCH_ID_MAX))


def sink_settings(options: Mapping[str, str], schema: StructType, streaming: bool) -> SinkSettings:
    """Check every option and column (BadSourceOption) and resolve the cluster's addresses."""
    opts = lowered(options)
    unknown = sorted(set(opts) - SINK_OPTIONS - SPARK_OPTIONS - set(ACCESS_OPTIONS))
    if unknown:
        raise BadSourceOption(f"unknown sink option(s): {', '.join(unknown)}", known=sorted(SINK_OPTIONS))
    if streaming and "sinkid" in opts:
        raise BadSourceOption("sinkId is for batch writes: a streaming sink's id is its query id, which "
                              "the checkpoint keeps")
    access = ClusterAccess.from_options(options)
    if not access.service_url:
        raise BadSourceOption("service.url is not set (option service.url or STRATA_SERVICE_URL)")
    columns = column_roles(schema)
    topic = opts.get("topic", "").strip()
    if topic:
        _check_topic_name(topic)
    elif "topic" not in dict(columns):
        raise BadSourceOption("no topic: set the topic option or give a topic column")
    exactly_once = _bool_option(opts, "exactlyOnce", True)
    if exactly_once and not access.admin_url:
        raise BadSourceOption("exactlyOnce needs admin.url (or STRATA_ADMIN_URL) to check that the topic "
                              "deduplicates; set exactlyOnce=false for an at-least-once sink")
    return SinkSettings(
        access=access, topic=topic, columns=columns, exactly_once=exactly_once,
        max_pending_messages=_int_option(opts, "maxPendingMessages", 1000, 1, 1_000_000),
        batching_max_messages=_int_option(opts, "batchingMaxMessages", 1000, 1, 1_000_000),
        batching_max_bytes=_int_option(opts, "batchingMaxBytes", 128 * 1024, 1024, 64 * 1024 * 1024),
        batching_max_publish_delay_ms=_int_option(opts, "batchingMaxPublishDelayMs", 10, 0, 60_000),
        send_timeout_ms=_int_option(opts, "sendTimeoutMs", 30_000, 100, 3_600_000),
        faults=_faults(opts))


def _check_topic_name(topic: str) -> None:
    try:
        parse_topic(topic)
    except InvalidTopicName as exc:
        raise BadSourceOption(f"topic {topic!r} is not a valid topic name: {exc}") from None


def check_deduplication(access: ClusterAccess, topic: str) -> None:
    """SinkNotExactlyOnce unless deduplication is in effect for `topic` (its own policy, else its
    namespace's), as the admin API reports it (asked with the sink's credentials)."""
    from analytics.authorization import admin_get

    name = parse_topic(topic).base
    admin_url = access.admin_url
    url = (f"{admin_url}/admin/v2/persistent/{name.tenant}/{name.namespace}/"
           f"{urllib.parse.quote(name.local)}/deduplicationEnabled?applied=true")
    try:
        enabled = json.loads(admin_get(access, url, ADMIN_TIMEOUT_S))
    except (AdminUnauthorized, AdminForbidden) as exc:
        # a topic policy: tenant admins read it (Pulsar's rule), producers may not
        raise SinkNotExactlyOnce(
            "the sink's role may not read the topic's deduplication policy (a tenant admin's or superuser's "
            "credentials may), so exactly-once cannot be checked; set exactlyOnce=false for an "
            "at-least-once sink", topic=str(name), status=exc.status) from None
    except (StrataError, ValueError) as exc:
        raise SinkNotExactlyOnce("could not check the topic's deduplication over the admin API",
                                 topic=str(name), error=str(exc)) from None
    if enabled is not True:
        raise SinkNotExactlyOnce(
            "deduplication is off for this topic, so a retried task would store its rows twice: enable it "
            f"(POST {admin_url}/admin/v2/namespaces/{name.tenant}/{name.namespace}/deduplication true) "
            "or set exactlyOnce=false for an at-least-once sink", topic=str(name))


def java_string_hash(key: str) -> int:
    """Java's `String.hashCode() & Integer.MAX_VALUE`: the Java client's default key routing."""
    units = key.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


# --- rows of an Arrow batch (executor side) ----------------------------------------------------

_TIMESTAMP_UNITS_PER_MS = {"ms": 1, "us": 1000, "ns": 1_000_000}
TOPICS_PER_TASK_MAX = 1000            # producers a task keeps open (per-row topics)

Row = tuple[bytes | None, str | None, str | None, dict[str, str] | None, int | None, str]


def _event_times_ms(column: Any) -> list[int | None]:
    import pyarrow as pa

    if not pa.types.is_timestamp(column.type):
        return [None if v is None or v <= 0 else int(v) for v in column.to_pylist()]
    raw = column.cast(pa.int64()).to_pylist()
    if column.type.unit == "s":
        return [None if v is None or v <= 0 else v * 1000 for v in raw]
    per_ms = _TIMESTAMP_UNITS_PER_MS[column.type.unit]
    return [None if v is None or v < per_ms else v // per_ms for v in raw]


def _text(value: Any, role: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise AnalyticsError(f"a row's {role} is binary that is not UTF-8 (Pulsar keys are strings)") from None


def arrow_rows(batch: Any, settings: SinkSettings) -> Iterator[Row]:
    """(value, key, ordering_key, properties, event time ms, topic) for every row of `batch`."""
    n = batch.num_rows
    cols: dict[str, list[Any]] = {}
    for role, name in settings.columns:
        column = batch.column(batch.schema.get_field_index(name))
        cols[role] = _event_times_ms(column) if role == "event_time" else column.to_pylist()
    none = [None] * n
    values, keys, ordering = cols["value"], cols.get("key", none), cols.get("ordering_key", none)
    props, times, topics = cols.get("properties", none), cols.get("event_time", none), cols.get("topic", none)
    for i in range(n):
        value = values[i]
        topic = settings.topic or topics[i]
        if not topic:
            raise AnalyticsError("a row has no topic (its topic column is null and no topic option is set)")
        pairs = props[i]
        properties = None if not pairs else {str(k): str(v) for k, v in pairs if v is not None}
        yield (value.encode() if isinstance(value, str) else value, _text(keys[i], "key"),
               _text(ordering[i], "ordering_key"), properties, times[i], topic)


# --- the sends of one task (executor side) -----------------------------------------------------

class _Target:
    """One producer of a task: its (partition) topic's next sequence id and where to resume."""

    __slots__ = ("next_seq", "producer", "resume_seq")

    def __init__(self, producer: Any, first_seq: int, resume_seq: int) -> None:
        self.producer = producer
        self.next_seq = first_seq
        self.resume_seq = resume_seq


class TaskSender:
    """A Pulsar client, one producer per (partition) topic under the task's producer name, and a
    window of at most `max_pending_messages` sends awaiting the broker."""

    def __init__(self, settings: SinkSettings, producer_name: str, batch_id: int, partition_id: int) -> None:
        self.settings = settings
        self.producer_name = producer_name
        self.partition_id = partition_id
        self.first_seq = batch_id * SEQUENCE_IDS_PER_BATCH + 1
        self.send_timeout_s = settings.send_timeout_ms / 1000
        self._client: Any = None           # connected at the first row: an empty task connects nothing
        self.partitions: dict[str, list[str]] = {}   # topic as given -> its partitions ([itself])
        self.keyless_rows: dict[str, int] = {}
        self.targets: dict[str, _Target] = {}
        self.checked: set[str] = {settings.topic} if settings.topic else set()   # dedup checked
        self.cond = threading.Condition()
        self.outstanding = 0
        self.failure: str | None = None
        self.rows_sent = 0
        self.rows_skipped = 0

    @property
    def client(self) -> Any:
        if self._client is None:
            import pulsar

            from analytics.authorization import pulsar_client_kwargs

            self._client = pulsar.Client(self.settings.access.service_url, operation_timeout_seconds=30,
                                         connection_timeout_ms=10_000, **pulsar_client_kwargs(self.settings.access),
                                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        return self._client

    @property
    def rows_handled(self) -> int:
        return self.rows_sent + self.rows_skipped

    def send(self, row: Row) -> None:
        value, key, ordering_key, properties, event_time_ms, topic = row
        target = self._target(self._route(topic, key))
        seq = target.next_seq
        if seq - self.first_seq >= ROWS_PER_BATCH_MAX:
            raise AnalyticsError("a task sends at most 2**32-1 rows to one topic per batch", topic=topic)
        target.next_seq += 1
        if seq < target.resume_seq:
            self.rows_skipped += 1        # an earlier attempt stored it (the broker's mark says so)
            return
        self._reserve()
        try:
            target.producer.send_async(value, self._on_sent(seq), properties=properties, partition_key=key,
                                       ordering_key=ordering_key, sequence_id=seq, event_timestamp=event_time_ms)
        except BaseException:
            self._release(None)
            raise
        self.rows_sent += 1

    def _reserve(self) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.outstanding < self.settings.max_pending_messages
                                      or self.failure is not None, timeout=self.send_timeout_s + DRAIN_MARGIN_S):
                raise SinkSendFailed("no send completed in time", producer=self.producer_name)
            if self.failure is not None:
                raise SinkSendFailed(self.failure, producer=self.producer_name)
            self.outstanding += 1

    def _release(self, problem: str | None) -> None:
        with self.cond:
            self.outstanding -= 1
            if problem is not None and self.failure is None:
                self.failure = problem
            self.cond.notify_all()

    def _on_sent(self, seq: int) -> Any:
        def done(result: Any, message_id: Any) -> None:   # on the client's thread: must not raise
            problem = None
            try:
                import pulsar

                if result != pulsar.Result.Ok:
                    problem = f"the send of sequence id {seq} failed: {result}"
                elif message_id.ledger_id() < 0:
                    problem = (f"sequence id {seq}, above the mark this attempt resumed from, was answered as a "
                               "duplicate: an earlier attempt's write landed meanwhile")
            except BaseException as exc:
                problem = f"the send callback failed: {exc!r}"
            self._release(problem)
        return done

    def _route(self, topic: str, key: str | None) -> str:
        """The (partition) topic a row goes to."""
        parts = self.partitions.get(topic)
        if parts is None:
            parts = self._open_topic(topic)
        if len(parts) == 1:
            return parts[0]
        if key:
            return parts[java_string_hash(key) % len(parts)]
        n = self.keyless_rows.get(topic, 0)
        self.keyless_rows[topic] = n + 1
        return parts[(self.partition_id + n) % len(parts)]

    def _open_topic(self, topic: str) -> list[str]:
        if len(self.partitions) >= TOPICS_PER_TASK_MAX:
            raise AnalyticsError(f"a task writes to at most {TOPICS_PER_TASK_MAX} topics", topic=topic)
        _check_topic_name(topic)
        if self.settings.exactly_once and topic not in self.checked:
            check_deduplication(self.settings.access, topic)
            self.checked.add(topic)
        parts = [str(p) for p in self.client.get_topic_partitions(topic)]
        self.partitions[topic] = parts
        return parts

    def _target(self, name: str) -> _Target:
        target = self.targets.get(name)
        if target is None:
            producer = self._create_producer(name)
            resume = max(self.first_seq, int(producer.last_sequence_id()) + 1)
            target = self.targets[name] = _Target(producer, self.first_seq, resume)
            if resume > self.first_seq:
                log.info("sink %s on %s resumes after sequence id %d", self.producer_name, name, resume - 1)
        return target

    def _create_producer(self, name: str) -> Any:
        """A producer under the task's name; while a dead attempt's producer still holds the name
        (ProducerBusy), retried for up to PRODUCER_BUSY_WAIT_S."""
        import pulsar

        s = self.settings
        deadline = time.monotonic() + PRODUCER_BUSY_WAIT_S
        while True:
            try:
                return self.client.create_producer(
                    name, producer_name=self.producer_name, batching_enabled=True,
                    batching_max_messages=s.batching_max_messages,
                    batching_max_allowed_size_in_bytes=s.batching_max_bytes,
                    batching_max_publish_delay_ms=s.batching_max_publish_delay_ms,
                    max_pending_messages=s.max_pending_messages, block_if_queue_full=False,
                    send_timeout_millis=s.send_timeout_ms)
            except pulsar.ProducerBusy:
                if time.monotonic() >= deadline:
                    raise SinkSendFailed("the producer name is still held by another attempt",
                                         producer=self.producer_name, topic=name) from None
                time.sleep(PRODUCER_BUSY_PAUSE_S)

    def finish(self) -> None:
        """Flush every producer and wait for every send's answer; SinkSendFailed if one failed."""
        import pulsar

        try:
            for target in self.targets.values():
                target.producer.flush()
        except pulsar.PulsarException as exc:
            raise SinkSendFailed(f"flush failed: {exc}", producer=self.producer_name) from None
        with self.cond:
            if not self.cond.wait_for(lambda: self.outstanding == 0, timeout=self.send_timeout_s + DRAIN_MARGIN_S):
                raise SinkSendFailed("sends still unanswered after the send timeout", producer=self.producer_name,
                                     outstanding=self.outstanding)
            if self.failure is not None:
                raise SinkSendFailed(self.failure, producer=self.producer_name)

    def close(self) -> None:
        if self._client is None:
            return
        try:
            self._client.close()
        except Exception as exc:  # the pulsar client's errors: closing is best effort
            log.warning("closing the sink's client failed: %s", exc)


def _inject(sender: TaskSender, faults: Faults) -> None:
    if faults.mode == "exit":
        os._exit(1)                       # a crash: no flush, no cleanup
    sender.finish()
    raise AnalyticsError("testing.failAfterRows: injected task failure", rows=sender.rows_handled)


def write_task(settings: SinkSettings, batches: Iterator[Any], write_id: str, batch_id: int) -> SinkCommit:
    """Send one task's rows (see the module docstring for the producer name and sequence ids)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise AnalyticsError("the sink writes inside a Spark task only")
    partition_id, attempt = context.partitionId(), context.attemptNumber()
    sender = TaskSender(settings, f"{PRODUCER_NAME_PREFIX}-{write_id}-{partition_id}", batch_id, partition_id)
    try:
        for batch in batches:
            for row in arrow_rows(batch, settings):
                sender.send(row)
                if settings.faults.due(sender.rows_handled, attempt, batch_id):
                    _inject(sender, settings.faults)
        sender.finish()
    finally:
        sender.close()
    return SinkCommit(partition_id, attempt, sender.rows_sent, sender.rows_skipped, tuple(sorted(sender.targets)))


def _log_commit(what: str, messages: list[Any]) -> None:
    commits = [m for m in messages if isinstance(m, SinkCommit)]
    log.info("%s: %d tasks sent %d rows (%d already stored by earlier attempts)", what, len(commits),
             sum(m.rows_sent for m in commits), sum(m.rows_skipped for m in commits))


# --- the writers Spark calls --------------------------------------------------------------------

def _write_id(options: Mapping[str, str]) -> str:
    sink_id = lowered(options).get("sinkid", "")
    if not sink_id:
        return uuid.uuid4().hex
    if len(sink_id) > 100 or not all(c.isalnum() or c in "_.-" for c in sink_id):
        raise BadSourceOption("sinkId must be 1..100 characters of letters, digits, '_', '.', '-'", value=sink_id)
    return sink_id


class SinkWriter(DataSourceArrowWriter):
    """`df.write.format("strata")`: built on the driver (options checked, deduplication of the
    `topic` option's topic verified), pickled to every task."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        if overwrite:
            raise BadSourceOption("a topic is append-only: write with mode('append'), not 'overwrite'")
        self.settings = sink_settings(options, schema, streaming=False)
        self.write_id = _write_id(options)
        if self.settings.exactly_once and self.settings.topic:
            check_deduplication(self.settings.access, self.settings.topic)

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        return write_task(self.settings, iterator, self.write_id, 0)

    def commit(self, messages: list[Any]) -> None:
        _log_commit(f"sink write {self.write_id}", messages)

    def abort(self, messages: list[Any]) -> None:
        _log_commit(f"sink write {self.write_id} ABORTED (what its tasks stored stays)", messages)


class SinkStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("strata")`: built when the query starts; each micro-batch's tasks
    take the query id and batch id from Spark's local properties."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.settings = sink_settings(options, schema, streaming=True)
        if self.settings.exactly_once and self.settings.topic:
            check_deduplication(self.settings.access, self.settings.topic)

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        query_id = context.getLocalProperty("sql.streaming.queryId") if context else None
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
        if not query_id or batch_id is None:
            raise AnalyticsError("a streaming write without the query id or the batch id in the task's "
                                 "local properties", query_id=query_id, batch_id=batch_id)
        if not 0 <= int(batch_id) <= BATCH_ID_MAX:
            raise AnalyticsError("micro-batch id out of range", batch_id=batch_id)
        return write_task(self.settings, iterator, query_id, int(batch_id))

    def commit(self, messages: list[Any], batchId: int) -> None:
        _log_commit(f"sink micro-batch {batchId}", messages)

    def abort(self, messages: list[Any], batchId: int) -> None:
        _log_commit(f"sink micro-batch {batchId} ABORTED (it is replayed; dedup drops what was stored)", messages)
