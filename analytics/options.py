"""The source's options, checked before any work starts: which topics, from where to where, and
how to fail.

Names follow StreamNative's pulsar-spark connector where it has them (case-insensitive):
- exactly one of `topic`, `topics` (comma list), `topicsPattern` (a regex matched against whole
  topic names, `persistent://tenant/ns/name`);
- `startingOffsets` / `endingOffsets`: "earliest", "latest", or JSON per topic (partition):
  `{"persistent://t/ns/x-partition-0": "12:0", "persistent://t/ns/y": [13, 5]}`; a value is a
  position "ledger:entry" (or [ledger, entry], or a MessageIdData byte array as Pulsar's connector
  writes it), or "earliest"/"latest". The start is inclusive, the end exclusive. Topics the JSON
  does not name take earliest (start) and latest (end). Batch defaults: earliest → latest;
  stream: latest (nothing ends a stream). A batch refuses startingOffsets=latest and
  endingOffsets=earliest, as the connector does.
- `startingTime` / `endingTime`: publish time in ms since the epoch (start inclusive, end
  exclusive); not together with offsets on the same side.
- `failOnDataLoss` (default true): messages the query asks for that retention removed fail the
  query with DataLost; false skips them with a warning.
- `maxRecordsPerTrigger`, `maxBytesPerTrigger` (stream admission limits, approximate: whole
  entries, sized by their ledger's average), `partitionBytes` (target stored bytes per Spark
  partition, default 128 MiB as Spark's maxPartitionBytes: each Python task costs ~0.1 s to
  start), `valueSchema` (a Spark StructType as JSON: JSON payloads decoded into a `value` struct
  column, analytics.value).
- access options: analytics.access.

What must hold: any option the source does not know, and any value that does not parse, is a
BadSourceOption raised here, on the driver, before a ledger is listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from analytics.access import ACCESS_OPTIONS, ClusterAccess, lowered
from common.errors import BadSourceOption, InvalidTopicName
from common.topic_names import parse_topic

EARLIEST = "earliest"
LATEST = "latest"
PARTITION_BYTES_DEFAULT = 128 * 1024 * 1024
SOURCE_OPTIONS = ("topic", "topics", "topicspattern", "startingoffsets", "endingoffsets", "startingtime",
                  "endingtime", "failondataloss", "maxrecordspertrigger", "maxbytespertrigger", "partitionbytes",
                  "valueschema")
_POSITION = re.compile(r"^\s*(-?\d+)\s*:\s*(-?\d+)\s*$")

Position = tuple[int, int]        # (ledger id, entry id)


@dataclass(frozen=True)
class Bound:
    """One end of the range: "earliest", "latest", or per-topic positions (others: the default)."""
    default: str                                            # EARLIEST or LATEST
    positions: dict[str, Position | str] = field(default_factory=dict)  # topic -> position or keyword

    def for_topic(self, topic: str) -> Position | str:
        return self.positions.get(topic, self.default)


@dataclass(frozen=True)
class SourceOptions:
    topics: tuple[str, ...]           # full names as given (partitioned ones expanded later)
    pattern: str                      # "" unless topicsPattern
    starting: Bound
    ending: Bound
    starting_time_ms: int | None
    ending_time_ms: int | None
    fail_on_data_loss: bool
    max_records_per_trigger: int | None
    max_bytes_per_trigger: int | None
    partition_bytes: int
    value_schema: str                 # "" or a Spark StructType as JSON: payloads decoded into `value`
    access: ClusterAccess
    columns: tuple[str, ...] = ()     # () = every column of the schema; else only these, in this order


def parse_source_options(options: Mapping[str, str], *, streaming: bool,
                         columns: tuple[str, ...] = ()) -> SourceOptions:
    opts = lowered(options)
    unknown = sorted(set(opts) - set(SOURCE_OPTIONS) - set(ACCESS_OPTIONS))
    if unknown:
        raise BadSourceOption(f"unknown option(s) {', '.join(unknown)} for format('strata')",
                              known=", ".join(SOURCE_OPTIONS + ACCESS_OPTIONS))
    topics, pattern = topics_of(opts)
    starting = _bound(opts.get("startingoffsets"), "startingOffsets", LATEST if streaming else EARLIEST)
    ending = _bound(opts.get("endingoffsets"), "endingOffsets", LATEST)
    starting_time = _int_option(opts, "startingtime", 0)
    ending_time = _int_option(opts, "endingtime", 0)
    if starting_time is not None and "startingoffsets" in opts:
        raise BadSourceOption("startingTime and startingOffsets cannot both be set")
    if ending_time is not None and "endingoffsets" in opts:
        raise BadSourceOption("endingTime and endingOffsets cannot both be set")
    if starting_time is not None and streaming and "startingoffsets" not in opts:
        starting = Bound(EARLIEST)            # a time start scans from the first kept ledger
    if streaming and ("endingoffsets" in opts or ending_time is not None):
        raise BadSourceOption("endingOffsets/endingTime are for batch queries; a stream has no end")
    if not streaming:
        if starting.default == LATEST or LATEST in starting.positions.values():
            raise BadSourceOption("startingOffsets=latest is not allowed in a batch query")
        if ending.default == EARLIEST or EARLIEST in ending.positions.values():
            raise BadSourceOption("endingOffsets=earliest is not allowed in a batch query")
    _check_order(starting, ending, starting_time, ending_time)
    return SourceOptions(
        topics=topics, pattern=pattern, starting=starting, ending=ending,
        starting_time_ms=starting_time, ending_time_ms=ending_time,
        fail_on_data_loss=_bool_option(opts, "failondataloss", True),
        max_records_per_trigger=_int_option(opts, "maxrecordspertrigger", 1),
        max_bytes_per_trigger=_int_option(opts, "maxbytespertrigger", 1),
        partition_bytes=_int_option(opts, "partitionbytes", 1) or PARTITION_BYTES_DEFAULT,
        value_schema=_value_schema(opts.get("valueschema", "")),
        access=ClusterAccess.from_options(opts), columns=columns)


def topics_of(opts: dict[str, str]) -> tuple[tuple[str, ...], str]:
    """(full topic names, "") or ((), pattern) from lower-cased options; BadSourceOption if bad."""
    given = [name for name in ("topic", "topics", "topicspattern") if opts.get(name)]
    if len(given) != 1:
        raise BadSourceOption("set exactly one of topic, topics, topicsPattern", given=", ".join(given) or "none")
    if given[0] == "topicspattern":
        try:
            re.compile(opts["topicspattern"])
        except re.error as exc:
            raise BadSourceOption(f"topicsPattern is not a valid regex: {exc}") from None
        return (), opts["topicspattern"]
    names = [t.strip() for t in opts[given[0]].split(",")] if given[0] == "topics" else [opts["topic"].strip()]
    if not all(names):
        raise BadSourceOption("empty topic name in topics", topics=opts[given[0]])
    return tuple(dict.fromkeys(_full_name(n) for n in names)), ""


def _full_name(name: str) -> str:
    try:
        return str(parse_topic(name))
    except InvalidTopicName as exc:
        raise BadSourceOption(f"bad topic name {name!r}: {exc}") from None


def _bound(raw: str | None, option: str, default: str) -> Bound:
    if raw is None or raw.strip().lower() in (EARLIEST, LATEST):
        return Bound(raw.strip().lower() if raw is not None else default)
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadSourceOption(f"{option} is not earliest, latest or JSON: {exc.msg} at {exc.pos}",
                              value=raw[:200]) from None
    if not isinstance(doc, dict) or not doc:
        raise BadSourceOption(f"{option} JSON must be an object of topic -> position", value=raw[:200])
    positions = {_full_name(str(topic)): _position(value, option, str(topic)) for topic, value in doc.items()}
    return Bound(default, positions)


def _position(value: Any, option: str, topic: str) -> Position | str:
    if isinstance(value, str) and value.strip().lower() in (EARLIEST, LATEST):
        return value.strip().lower()
    if isinstance(value, str) and (match := _POSITION.match(value)):
        position = int(match.group(1)), int(match.group(2))
    elif isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        position = value[0], value[1]
    elif isinstance(value, list) and len(value) > 2 and all(isinstance(v, int) and -128 <= v < 256 for v in value):
        position = _message_id_position(bytes(v & 0xFF for v in value), option, topic)
    else:
        raise BadSourceOption(f"{option}: position of {topic} must be 'ledger:entry', [ledger, entry] "
                              "or a MessageIdData byte array", value=str(value)[:200])
    if position[0] < 0 or position[1] < 0:
        raise BadSourceOption(f"{option}: position of {topic} is negative", position=f"{position[0]}:{position[1]}")
    return position


def _message_id_position(raw: bytes, option: str, topic: str) -> Position:
    from google.protobuf.message import DecodeError

    from proto import pulsar_api_pb2 as pb

    message_id = pb.MessageIdData()
    try:
        message_id.ParseFromString(raw)
    except DecodeError:
        raise BadSourceOption(f"{option}: the byte array of {topic} is not a MessageIdData") from None
    if not message_id.IsInitialized():
        raise BadSourceOption(f"{option}: the byte array of {topic} lacks ledgerId/entryId")
    return int(message_id.ledgerId), int(message_id.entryId)


def _value_schema(raw: str) -> str:
    if raw:
        from analytics.value import value_struct

        value_struct(raw)            # BadSourceOption unless it is a StructType
    return raw


def _int_option(opts: dict[str, str], name: str, minimum: int) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadSourceOption(f"{name} must be an integer", value=raw[:100]) from None
    if value < minimum:
        raise BadSourceOption(f"{name} must be >= {minimum}", value=value)
    return value


def _bool_option(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise BadSourceOption(f"{name} must be true or false", value=raw[:100])
    return raw.strip().lower() == "true"


def _check_order(starting: Bound, ending: Bound, starting_time: int | None, ending_time: int | None) -> None:
    if starting_time is not None and ending_time is not None and ending_time < starting_time:
        raise BadSourceOption("endingTime is before startingTime", startingTime=starting_time, endingTime=ending_time)
    for topic, end in ending.positions.items():
        start = starting.for_topic(topic)
        if isinstance(start, tuple) and isinstance(end, tuple) and end < start:
            raise BadSourceOption("endingOffsets is before startingOffsets", topic=topic,
                                  starting=f"{start[0]}:{start[1]}", ending=f"{end[0]}:{end[1]}")
