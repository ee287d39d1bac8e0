"""What every Kafka client must be able to do against Strata's Kafka listener, written once; each
test_<client>.py supplies a `Client` adapter (its own producer, assign()-based consumer and admin
client) and calls these.

A client adapter never joins a group: consumers use assign() with explicit positions (groups are a
later part of the listener). Each scenario makes its own topic, so scenarios share one standalone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tests.kafka.helpers import (
    Rec,
    assert_offsets_increase,
    assert_same_records,
    create_partitioned,
    now_ms,
    rest_partitions,
    sample_records,
    unique_topic,
)
from tests.support.waiting import wait_until

METADATA_WAIT_S = 20.0

# a start position for Client.consume
EARLIEST: tuple[str, int] = ("earliest", 0)
LATEST: tuple[str, int] = ("latest", 0)


def at(offset: int) -> tuple[str, int]:
    return ("offset", offset)


class Client(Protocol):
    name: str
    compressions: Sequence[str]     # what it can produce without plug-ins
    null_header: bool           # can it send a header whose value is null

    def produce(self, topic: str, recs: list[Rec], compression: str = "none", idempotent: bool = False,
                one_batch: bool = False) -> list[int]:
        """Send recs (each to rec.partition, with its key, value, headers, timestamp), all acknowledged;
        the offset each got, in order. one_batch: all in one record batch (one request)."""
        ...

    def consume(self, topic: str, partition: int, start: tuple[str, int], expect: int,
                then_produce: list[Rec] | None = None) -> list[Rec]:
        """assign() one partition at `start`, read until `expect` records and the end of the partition
        (bounded). With then_produce: once the position is resolved, produce those (same client) first."""
        ...

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The client's offsets_for_times: first offset with record time >= timestamp (None: none)."""
        ...

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None: ...
    def describe_configs(self, topic: str) -> dict[str, str]: ...
    def add_partitions(self, topic: str, total: int) -> None: ...
    def delete_topic(self, topic: str) -> None: ...

    def partition_count(self, topic: str) -> int | None:
        """Partitions the client's metadata shows for topic (None: the topic is not there). Never
        auto-creates: its Metadata request sets AllowAutoTopicCreation false (or lists all topics)."""
        ...


def produce_and_read_back(client: Client, admin_url: str, idempotent: bool) -> None:
    """Each compression the client has, records spread over 2 partitions; everything read back
    exactly (keys, values, headers incl. non-UTF-8 and null, timestamps), offsets as acknowledged."""
    topic = unique_topic(f"{client.name}-rt-{'idem' if idempotent else 'plain'}")
    create_partitioned(admin_url, topic, 2)
    sent: list[Rec] = []
    for compression in client.compressions:
        recs = [Rec(r.key, r.value, r.headers, r.timestamp, i % 2)
                for i, r in enumerate(sample_records(compression, 8, null_header=client.null_header))]
        offsets = client.produce(topic, recs, compression=compression, idempotent=idempotent)
        assert len(offsets) == len(recs)
        sent += [Rec(r.key, r.value, r.headers, r.timestamp, r.partition, o) for r, o in zip(recs, offsets)]
    for partition in (0, 1):
        mine = [r for r in sent if r.partition == partition]
        got = client.consume(topic, partition, EARLIEST, expect=len(mine))
        assert_same_records(mine, got, f"{client.name} partition {partition} (compressions {client.compressions})")
        assert [r.offset for r in got] == [r.offset for r in mine], "offsets read differ from those acknowledged"
        assert_offsets_increase(got)


class Seeded:
    """A one-partition topic holding 3 batches of 10 records, times 1 s apart between batches."""

    def __init__(self, client: Client, admin_url: str) -> None:
        self.topic = unique_topic(f"{client.name}-modes")
        create_partitioned(admin_url, self.topic, 1)
        base = now_ms() - 600_000
        self.recs: list[Rec] = []
        for b in range(3):
            batch = sample_records(f"b{b}", 10, base_ts=base + b * 1000, null_header=client.null_header)
            offsets = client.produce(self.topic, batch, one_batch=True)
            self.recs += [Rec(r.key, r.value, r.headers, r.timestamp, 0, o) for r, o in zip(batch, offsets)]
        assert_offsets_increase(self.recs)


def consume_from_earliest(client: Client, seeded: Seeded) -> None:
    got = client.consume(seeded.topic, 0, EARLIEST, expect=len(seeded.recs))
    assert_same_records(seeded.recs, got, f"{client.name} from earliest")


def consume_from_offset_inside_a_batch(client: Client, seeded: Seeded) -> None:
    """Batch 2 is records 10..19; starting at record 14 the client must drop 10..13 itself."""
    start = seeded.recs[14].offset
    got = client.consume(seeded.topic, 0, at(start), expect=len(seeded.recs) - 14)
    assert_same_records(seeded.recs[14:], got, f"{client.name} from offset {start} (inside a batch)")
    assert got[0].offset == start


def consume_by_timestamp(client: Client, seeded: Seeded) -> None:
    """offsets_for_times: the first record whose time is >= t (t between records 16 and 17), then
    read from there; a time after the last record has no offset."""
    t = seeded.recs[17].timestamp - 3
    offset = client.offset_for_time(seeded.topic, 0, t)
    assert offset == seeded.recs[17].offset, (offset, [(r.offset, r.timestamp) for r in seeded.recs[15:19]], t)
    got = client.consume(seeded.topic, 0, at(offset), expect=len(seeded.recs) - 17)
    assert_same_records(seeded.recs[17:], got, f"{client.name} from time {t}")
    assert client.offset_for_time(seeded.topic, 0, seeded.recs[-1].timestamp + 1) is None
    assert client.offset_for_time(seeded.topic, 0, 0) == seeded.recs[0].offset


def consume_from_latest(client: Client, admin_url: str) -> None:
    """At latest the client sees only what is produced after its position was resolved."""
    topic = unique_topic(f"{client.name}-latest")
    create_partitioned(admin_url, topic, 1)
    client.produce(topic, sample_records("old", 5, null_header=client.null_header))
    new = sample_records("new", 3, null_header=client.null_header)
    got = client.consume(topic, 0, LATEST, expect=3, then_produce=new)
    assert_same_records(new, got, f"{client.name} from latest")


def admin_topic_lifecycle(client: Client, admin_url: str) -> None:
    """Create (3 partitions, retention.ms), describe configs, add partitions (3 → 5), use the new
    partition, delete; Strata's admin REST sees the same topic."""
    topic = unique_topic(f"{client.name}-admin")
    client.create_topic(topic, 3, {"retention.ms": "3600000"})
    wait_until(lambda: client.partition_count(topic) == 3, METADATA_WAIT_S, what=f"{topic} with 3 partitions")
    assert rest_partitions(admin_url, topic) == 3
    configs = client.describe_configs(topic)
    assert configs.get("retention.ms") == "3600000", configs

    client.add_partitions(topic, 5)
    wait_until(lambda: client.partition_count(topic) == 5, METADATA_WAIT_S, what=f"{topic} with 5 partitions")
    assert rest_partitions(admin_url, topic) == 5
    recs = [Rec(r.key, r.value, r.headers, r.timestamp, 4)
            for r in sample_records("p4", 3, null_header=client.null_header)]
    client.produce(topic, recs)
    assert_same_records(recs, client.consume(topic, 4, EARLIEST, expect=3), f"{client.name} new partition 4")

    client.delete_topic(topic)
    # asked of Strata, not through Metadata: with kafka_auto_create_topics on (as Kafka's
    # auto.create.topics.enable), a Metadata request naming the deleted topic creates it again
    # (librdkafka's list_topics(topic) and aiokafka's describe_topics allow auto-creation)
    assert rest_partitions(admin_url, topic) == 0
    # and the client's own view, asked without auto-creation (every adapter's partition_count)
    wait_until(lambda: client.partition_count(topic) is None, METADATA_WAIT_S, what=f"{topic} gone")


def error_codes(obj: Any) -> list[int]:
    """Every non-zero `error_code` in a decoded admin response (nested dicts, lists, tuples)."""
    found: list[int] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.endswith("error_code") and isinstance(v, int) and v != 0:
                found.append(v)
            else:
                found += error_codes(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            found += error_codes(v)
    return found


def names(obj: Any, topic: str) -> bool:
    """Whether a decoded admin response (nested dicts, lists, tuples) holds `topic` as a value: Kafka
    answers CreateTopics/DeleteTopics/CreatePartitions with one result per topic asked, so a missing
    one is a wrong answer even when no error code is set."""
    if isinstance(obj, str):
        return obj == topic
    if isinstance(obj, dict):
        return any(names(v, topic) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(names(v, topic) for v in obj)
    return False
