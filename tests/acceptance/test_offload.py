"""Tiered storage end to end (issue 12 items 5 and 7): the official client, a real standalone and
a real SeaweedFS (the session's `s3_server`).

One standalone for the module. About 50k messages (batches from plain, LZ4 and ZSTD producers,
with keys, properties and event times) go to one topic whose ledgers roll every 100 entries, so
they span many ledgers. A clean restart closes the last of them, so the whole corpus is in
closed ledgers; then it is offloaded (every ledger before the new open one), the namespace's
deletion lag is set to 0 and the bookie copies must go (ListLedgers and GetInfo of the
bookies). A short tail is produced afterwards into the open ledger, so reads cross from S3 to
the bookies.

What must hold:
- the offload status is SUCCESS with firstUnoffloadedMessage = (open ledger, 0); internalStats
  flags every closed ledger offloaded and keeps it listed after its bookie copy is gone; the
  bookie copies stay until the lag allows their deletion; stats' storageSize includes
  offloadedStorageSize; the bucket holds exactly one object per offloaded ledger;
- Exclusive, Shared, Key_Shared and Failover subscriptions, a Reader, and seeks by id and by
  publish time into an offloaded ledger deliver every message byte-identical, with the ids the
  producers got, in order (per consumer), exactly once, and no read
  fails or is retried on the way (the broker's log says so, checked when the module's standalone
  stops);
- pyarrow reading the topic's S3 prefix sees exactly the corpus: payloads, keys, properties,
  event times and message_id bytes that `pulsar.MessageId.deserialize` turns into the send ids.

Each on a topic of its own in the same standalone: offloadThreshold 0 offloads every closed
ledger unasked (never the open one); retention trimming an offloaded ledger deletes its object;
a partitioned topic's partitions offload under `partition-{i}/` folders, which pyarrow reads
as one dataset; `strata admin topics offload -s / offload-status -w` and the namespace lag
commands print what pulsar-admin prints.
"""

from __future__ import annotations

import datetime
import itertools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulsar
import pytest

from tests.acceptance.conftest import make_client
from tests.support.namespaces import ensure_namespace
from tests.support.offload_checks import (
    Admin,
    BookieSnapshot,
    S3Access,
    Sent,
    assert_same_messages,
    bookie_snapshot,
    http,
    id_of,
    in_id_order,
    offloaded_ids,
    produce_corpus,
    receive_views,
    received_view,
)
from tests.support.pulsar_failover import pulsar_failover_active
from tests.support.seaweed import TestSeaweed
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess
from tests.support.waiting import wait_until

MESSAGES = 50_000
TAIL_MESSAGES = 200
SEED = 1212
ROLLOVER_ENTRIES = 100
OFFLOAD_TIMEOUT_S = 240.0
BOOKIE_DELETE_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 120.0
NS = f"public/offload-{os.getpid()}"
TOPIC = f"persistent://{NS}/corpus"
PREFIX = f"accept-{os.getpid()}"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MILLISECOND = datetime.timedelta(milliseconds=1)
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200",
       "STRATA_RETENTION_TIME_MINUTES": "-1", "STRATA_RETENTION_SIZE_MB": "-1",
       # small segments, frequent checkpoints and GC: a deleted ledger's disk is given back soon
       "STRATA_BOOKIE_SEGMENT_FILE_BYTES_MAX": str(1 << 20),
       "STRATA_BOOKIE_CHECKPOINT_INTERVAL_MS": "300", "STRATA_BOOKIE_GC_INTERVAL_MS": "300"}


@dataclass
class World:
    """The module's standalone, its corpus and what was observed while offloading it."""

    sa: StandaloneProcess
    admin: Admin
    s3: S3Access
    corpus: list[Sent]                      # in topic order
    tail: list[Sent] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)      # closed ledgers at the offload
    open_ledger: int = -1
    status: dict = field(default_factory=dict)
    ledgers_offloaded: list[dict] = field(default_factory=list)  # internalStats after the offload
    stats_offloaded: dict = field(default_factory=dict)
    bookies_before: BookieSnapshot | None = None
    bookies_offloaded: BookieSnapshot | None = None   # offloaded, lag still 4 h
    bookies_after_lag: BookieSnapshot | None = None
    objects: dict[str, int] = field(default_factory=dict)

    @property
    def everything(self) -> list[Sent]:
        return self.corpus + self.tail


@pytest.fixture(scope="module")
def world(s3_server: TestSeaweed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    bucket = "accept-offload"
    s3 = S3Access.of(s3_server, bucket, PREFIX)
    env = {**s3_server.standalone_env(bucket, PREFIX), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("offload") / "data", env=env) as sa:
        ensure_namespace(sa.admin_url, NS)
        w = World(sa, Admin(sa.admin_url), s3, [])
        client = make_client(sa.service_url)
        w.corpus = in_id_order(produce_corpus(client, TOPIC, MESSAGES, SEED))
        client.close()
        sa.restart()            # closes the corpus' last ledger: all of it is in closed ledgers
        _load(sa.service_url)
        _offload_and_drop_bookie_copies(w)
        client = make_client(sa.service_url)
        w.tail = in_id_order(produce_corpus(client, TOPIC, TAIL_MESSAGES, SEED + 1, chunk=50))
        client.close()
        yield w
        log = sa.log_path.read_text(errors="replace")
    # Checked at teardown, so it covers every read of this module's tests, whichever of them ran
    # and in whatever order: reads from S3 need no retry (apache/pulsar#9266: a first read that
    # fails), so the broker logged no failed dispatch and no traceback. A failure here is reported
    # as an ERROR on the module's last test.
    failures = [line for line in log.splitlines()
                if ("dispatch on" in line and "failed" in line) or "Traceback" in line]
    assert not failures, failures[:5]


def _load(service_url: str) -> None:
    """Load the topic on the restarted broker (a reader attaches, then goes)."""
    client = make_client(service_url)
    client.create_reader(TOPIC, pulsar.MessageId.earliest).close()
    client.close()


def _offload_and_drop_bookie_copies(w: World) -> None:
    ledgers = w.admin.ledgers(TOPIC)
    w.open_ledger = int(ledgers[-1]["ledgerId"])
    w.closed = [int(x["ledgerId"]) for x in ledgers[:-1] if x["entries"] > 0]
    w.bookies_before = bookie_snapshot(w.sa.data_dir)
    status, body = w.admin.offload(TOPIC, w.open_ledger)
    assert status == 204, (status, body)
    w.status = w.admin.wait_offload_finished(TOPIC, OFFLOAD_TIMEOUT_S)
    w.ledgers_offloaded = w.admin.ledgers(TOPIC)
    w.stats_offloaded = w.admin.stats(TOPIC)
    w.bookies_offloaded = bookie_snapshot(w.sa.data_dir)
    w.objects = w.s3.list_objects(w.s3.topic_prefix(TOPIC))
    status, body = w.admin.set_ns(NS, "offloadDeletionLagMs", 0)
    assert status == 204, (status, body)
    closed = set(w.closed)
    after = wait_until(lambda: _without(bookie_snapshot(w.sa.data_dir), closed), BOOKIE_DELETE_TIMEOUT_S,
                       what="the bookie copies of the offloaded ledgers deleted", interval_s=0.2)
    assert isinstance(after, BookieSnapshot)
    w.bookies_after_lag = after


def _without(snapshot: BookieSnapshot, ledgers: set[int]) -> BookieSnapshot | None:
    """The snapshot if no bookie holds any of `ledgers`, else None."""
    return None if snapshot.ledger_ids & ledgers else snapshot


def test_offload_moves_closed_ledgers_to_s3_and_the_lag_deletes_the_bookie_copies(world: World) -> None:
    w = world
    assert len(w.closed) >= 8, f"the corpus should span many ledgers: {w.closed}"
    assert {m.msg_id[0] for m in w.corpus} == set(w.closed)
    assert w.status["status"] == "SUCCESS", w.status
    assert w.status["lastError"] == ""
    first = w.status["firstUnoffloadedMessage"]
    assert (first["ledgerId"], first["entryId"]) == (w.open_ledger, 0), w.status
    assert offloaded_ids(w.ledgers_offloaded) == set(w.closed)
    assert w.objects.keys() == {w.s3.ledger_key(TOPIC, ledger) for ledger in w.closed}
    assert all(size > 0 for size in w.objects.values())
    # the bookie copies stay until the lag (default 4 h) allows their deletion
    assert w.bookies_before is not None and w.bookies_offloaded is not None
    assert set(w.closed) <= w.bookies_before.ledger_ids
    assert set(w.closed) <= w.bookies_offloaded.ledger_ids
    after = present_snapshot(w.bookies_after_lag)
    assert not (after.ledger_ids & set(w.closed))
    assert w.open_ledger in bookie_snapshot(w.sa.data_dir).ledger_ids, "the tail is on the bookies"
    assert after.ledger_count <= w.bookies_offloaded.ledger_count - len(w.closed)
    # GetInfo's disk use drops once the bookie's GC reclaims the dead segments
    offloaded_disk_bytes = w.bookies_offloaded.disk_used_bytes
    wait_until(lambda: bookie_snapshot(w.sa.data_dir).disk_used_bytes < offloaded_disk_bytes // 2,
               60, what=f"bookie disk use below half of {offloaded_disk_bytes} B", interval_s=0.3)


def present_snapshot(snapshot: BookieSnapshot | None) -> BookieSnapshot:
    assert snapshot is not None
    return snapshot


def test_stats_count_offloaded_ledgers_which_stay_listed(world: World) -> None:
    w = world
    ledgers = w.admin.ledgers(TOPIC)
    assert [x["ledgerId"] for x in ledgers][:len(w.closed)] == w.closed, "every ledger stays listed"
    assert offloaded_ids(ledgers) == set(w.closed)
    offloaded_bytes = sum(x["size"] for x in ledgers if x["offloaded"])
    stats = w.admin.stats(TOPIC)
    assert stats["offloadedStorageSize"] == offloaded_bytes > 0
    assert stats["storageSize"] >= stats["offloadedStorageSize"]
    assert stats["storageSize"] >= w.stats_offloaded["storageSize"], "deleting bookie copies frees no kept data"
    assert stats["lastOffloadLedgerId"] == max(w.closed)
    assert stats["lastOffloadSuccessTimeStamp"] > 0
    assert stats["lastOffloadFailureTimeStamp"] == 0


def test_exclusive_consumer_and_seeks_into_offloaded_ledgers(world: World) -> None:
    w = world
    client = make_client(w.sa.service_url)
    try:
        consumer = client.subscribe(TOPIC, "exclusive", consumer_type=pulsar.ConsumerType.Exclusive,
                                    initial_position=pulsar.InitialPosition.Earliest)
        views, publish_ms = [], []
        for _ in range(len(w.everything)):
            msg = consumer.receive(30_000)
            consumer.acknowledge(msg)
            views.append(received_view(msg))
            publish_ms.append(msg.publish_timestamp())
        assert_same_messages(views, w.everything, "exclusive from earliest")
        assert all(a <= b for a, b in itertools.pairwise(publish_ms))
        # seek by id into the middle of an offloaded ledger: resumes right after that message
        at = _middle_of(w, w.closed[len(w.closed) // 3])
        consumer.seek(pulsar.MessageId.deserialize(w.everything[at].serialized_id))
        assert_same_messages(receive_views(consumer, len(w.everything) - at - 1), w.everything[at + 1:],
                             "exclusive after seek by id")
        # seek by publish time: the first message published at or after it
        at = _publish_boundary(publish_ms, _middle_of(w, w.closed[2 * len(w.closed) // 3]))
        consumer.seek(publish_ms[at])
        assert_same_messages(receive_views(consumer, len(w.everything) - at), w.everything[at:],
                             "exclusive after seek by publish time")
    finally:
        client.close()


def _middle_of(w: World, ledger_id: int) -> int:
    """Index (in topic order) of a message in the middle of `ledger_id`."""
    indexes = [n for n, m in enumerate(w.everything) if m.msg_id[0] == ledger_id]
    return indexes[len(indexes) // 2]


def _publish_boundary(publish_ms: list[int], start: int) -> int:
    """The first index from `start` whose publish time is later than its predecessor's."""
    return next(n for n in range(start, len(publish_ms)) if publish_ms[n] > publish_ms[n - 1])


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared,
                                  pulsar.ConsumerType.Failover], ids=["shared", "key-shared", "failover"])
def test_two_consumer_subscriptions_get_everything_once(world: World, kind: Any) -> None:
    """Every message once across the two consumers, byte-identical, and each consumer's stream in
    id order (Key_Shared included: a consumer joining mid-backlog gets nothing newer while its
    keys drain at the other, so per-key order holds even for batches of mixed keys). Failover:
    b is named so that Pulsar's consistent-hash choice keeps a active when b joins (a switch
    would legitimately redeliver a's unacked messages to b)."""
    w = world
    client = make_client(w.sa.service_url)
    got: dict[str, list[tuple]] = {"a": [], _standby_name("a"): []}
    lock = threading.Lock()

    def listener(name: str):
        def on_message(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
            with lock:
                got[name].append(received_view(msg))
            consumer.acknowledge(msg)
        return on_message
    try:
        for name in got:
            client.subscribe(TOPIC, f"two-{kind}", consumer_type=kind, message_listener=listener(name),
                             initial_position=pulsar.InitialPosition.Earliest, consumer_name=name)
        wait_until(lambda: sum(len(v) for v in got.values()) >= len(w.everything), 120,
                   what=f"{len(w.everything)} messages on the {kind} subscription", interval_s=0.1)
    finally:
        client.close()
    for name, views in got.items():
        assert [v[0] for v in views] == sorted(v[0] for v in views), f"consumer {name} out of order"
    if kind == pulsar.ConsumerType.Failover:
        assert not got[_standby_name("a")], "the standby consumer got messages"
    by_id = {s.msg_id: s for s in w.everything}
    union = sorted((v for views in got.values() for v in views), key=lambda v: v[0])
    assert [v[0] for v in union] == [s.msg_id for s in w.everything], "each message exactly once"
    assert_same_messages(union, [by_id[v[0]] for v in union], str(kind))


def _standby_name(active: str) -> str:
    """A consumer name that Pulsar's failover choice for TOPIC (a consistent-hash ring over the
    names; tests.support.pulsar_failover, independent of the broker's code) ranks below `active`."""
    for n in range(1_000):
        if pulsar_failover_active(TOPIC, [active, f"standby-{n}"]) == active:
            return f"standby-{n}"
    raise AssertionError("no standby name found")


def test_reader_from_earliest_and_from_an_offloaded_id(world: World) -> None:
    w = world
    client = make_client(w.sa.service_url)
    try:
        reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
        views = [received_view(reader.read_next(30_000)) for _ in range(len(w.everything))]
        assert_same_messages(views, w.everything, "reader from earliest")
        assert not reader.has_message_available()
        at = _middle_of(w, w.closed[1])
        start = pulsar.MessageId.deserialize(w.everything[at].serialized_id)
        inclusive = client.create_reader(TOPIC, start, start_message_id_inclusive=True)
        views = [received_view(inclusive.read_next(30_000)) for _ in range(2_000)]
        assert_same_messages(views, w.everything[at:at + 2_000], "reader from an offloaded id, inclusive")
    finally:
        client.close()


def test_pyarrow_reads_exactly_the_offloaded_messages_from_the_topic_prefix(world: World) -> None:
    w = world
    table = w.s3.read_table(w.s3.topic_prefix(TOPIC)).sort_by(
        [("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")])
    assert table.num_rows == len(w.corpus)
    rows = table.select(["ledger_id", "entry_id", "batch_index", "message_id", "payload", "key",
                         "properties", "event_time", "topic", "producer_name"]).to_pylist()
    views = []
    for row in rows:
        mid = pulsar.MessageId.deserialize(row["message_id"])
        assert id_of(mid) == (row["ledger_id"], row["entry_id"], row["batch_index"])
        assert row["topic"] == TOPIC
        event_ms = 0 if row["event_time"] is None else (row["event_time"] - EPOCH) // MILLISECOND
        views.append((id_of(mid), row["payload"] or b"", row["key"] or "", dict(row["properties"] or []),
                      event_ms))
    assert_same_messages(views, w.corpus, "pyarrow rows of the topic prefix")
    assert [r["producer_name"] for r in rows] == [s.producer for s in w.corpus]
    for key in w.objects:
        _, meta = w.s3.read_object(key)
        ledger = int(meta["strata.ledger_id"])
        assert key == w.s3.ledger_key(TOPIC, ledger)
        assert int(meta["strata.messages"]) == sum(1 for s in w.corpus if s.msg_id[0] == ledger)
        assert meta["strata.topic"] == TOPIC


def _ns_of_its_own(w: World, what: str) -> str:
    ns = f"public/offload-{what}-{os.getpid()}"
    ensure_namespace(w.sa.admin_url, ns)
    return ns


def _closed_with_entries(ledgers: list[dict]) -> set[int]:
    return {int(x["ledgerId"]) for x in ledgers[:-1] if x["entries"] > 0}


def test_threshold_zero_offloads_every_closed_ledger_without_being_asked(world: World) -> None:
    w = world
    ns = _ns_of_its_own(w, "auto")
    topic = f"persistent://{ns}/auto"
    assert w.admin.set_ns(ns, "offloadThreshold", 0)[0] == 204
    assert w.admin.get_ns(ns, "offloadThreshold") == 0
    client = make_client(w.sa.service_url)
    try:
        produce_corpus(client, topic, 12_000, SEED + 2)
    finally:
        client.close()
    closed = _closed_with_entries(w.admin.ledgers(topic))
    assert len(closed) >= 2, w.admin.ledgers(topic)
    wait_until(lambda: offloaded_ids(w.admin.ledgers(topic)) == closed, 120,
               what=f"ledgers {sorted(closed)} offloaded by the threshold", interval_s=0.2)
    assert set(w.s3.list_objects(w.s3.topic_prefix(topic))) == {w.s3.ledger_key(topic, x) for x in closed}
    assert not w.admin.ledgers(topic)[-1]["offloaded"], "the open ledger is never offloaded"


def test_retention_deletes_an_offloaded_ledger_with_its_object(world: World) -> None:
    w = world
    ns = _ns_of_its_own(w, "retention")
    topic = f"persistent://{ns}/trimmed"
    status, body = http("POST", w.admin.ns_url(ns, "retention"), {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    assert status == 204, (status, body)
    client = make_client(w.sa.service_url)
    try:
        consumer = client.subscribe(topic, "acks-all", initial_position=pulsar.InitialPosition.Earliest)
        sent = in_id_order(produce_corpus(client, topic, 12_000, SEED + 3))
        ledgers = w.admin.ledgers(topic)
        closed = _closed_with_entries(ledgers)
        assert w.admin.offload(topic, int(ledgers[-1]["ledgerId"]))[0] == 204
        assert w.admin.wait_offload_finished(topic, OFFLOAD_TIMEOUT_S)["status"] == "SUCCESS"
        prefix = w.s3.topic_prefix(topic)
        assert set(w.s3.list_objects(prefix)) == {w.s3.ledger_key(topic, x) for x in closed}
        assert_same_messages(receive_views(consumer, len(sent)), sent, "consumed before the trim")
        wait_until(lambda: not ({int(x["ledgerId"]) for x in w.admin.ledgers(topic)} & closed), 60,
                   what=f"the acked ledgers {sorted(closed)} trimmed", interval_s=0.2)
        wait_until(lambda: not w.s3.list_objects(prefix), 60, what="the trimmed ledgers' objects deleted",
                   interval_s=0.2)
    finally:
        client.close()


def test_a_partitioned_topic_offloads_under_partition_folders_read_as_one_dataset(world: World) -> None:
    w = world
    ns = _ns_of_its_own(w, "partitioned")
    topic = f"persistent://{ns}/parted"
    assert http("PUT", f"{w.admin.topic_url(topic, 'partitions')}", 2)[0] == 204
    client = make_client(w.sa.service_url)
    try:
        sent = produce_corpus(client, topic, 20_000, SEED + 4)
    finally:
        client.close()
    offloaded: set[int] = set()
    for index in range(2):
        partition = f"{topic}-partition-{index}"
        ledgers = w.admin.ledgers(partition)
        assert w.admin.offload(partition, int(ledgers[-1]["ledgerId"]))[0] == 204
        assert w.admin.wait_offload_finished(partition, OFFLOAD_TIMEOUT_S)["status"] == "SUCCESS"
        closed = _closed_with_entries(ledgers)
        assert len(closed) >= 1
        folder = f"{w.s3.topic_prefix(topic)}partition-{index}/"
        assert set(w.s3.list_objects(folder)) == {f"{folder}ledger-{x:020d}.parquet" for x in closed}
        offloaded |= closed
    table = w.s3.read_table(w.s3.topic_prefix(topic))
    rows = table.select(["partition", "ledger_id", "entry_id", "batch_index", "payload", "topic"]).to_pylist()
    want = {(s.msg_id, s.payload) for s in sent if s.msg_id[0] in offloaded}
    got = {((r["ledger_id"], r["entry_id"], r["batch_index"]), r["payload"] or b"") for r in rows}
    assert len(rows) == len(got) == len(want) and got == want
    assert all(r["topic"] == f"{topic}-partition-{r['partition']}" for r in rows)
    assert {r["partition"] for r in rows} == {0, 1}


def _strata_admin(w: World, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", "admin", "--admin-url", w.sa.admin_url, *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)


def test_strata_admin_offload_commands_as_pulsar_admin(world: World) -> None:
    w = world
    ns = _ns_of_its_own(w, "cli")
    topic = f"persistent://{ns}/by-cli"
    client = make_client(w.sa.service_url)
    try:
        produce_corpus(client, topic, 12_000, SEED + 5)
    finally:
        client.close()
    ledgers = w.admin.ledgers(topic)
    open_ledger = int(ledgers[-1]["ledgerId"])
    done = _strata_admin(w, "topics", "offload-status", topic)
    assert (done.returncode, done.stdout.strip()) == (0, f"Offload has not been run for {topic} since broker startup")
    done = _strata_admin(w, "topics", "offload", "-s", "0", topic)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"Offload triggered for {topic} for messages before {open_ledger}:0:-1"
    done = _strata_admin(w, "topics", "offload-status", "-w", topic)
    assert (done.returncode, done.stdout.strip()) == (0, "Offload was a success"), done.stderr
    assert offloaded_ids(w.admin.ledgers(topic)) == _closed_with_entries(ledgers)
    done = _strata_admin(w, "namespaces", "set-offload-deletion-lag", "-l", "10m", ns)
    assert done.returncode == 0, done.stderr
    done = _strata_admin(w, "namespaces", "get-offload-deletion-lag", ns)
    assert (done.returncode, done.stdout.strip()) == (0, "10 minute(s)")
    assert w.admin.get_ns(ns, "offloadDeletionLagMs") == 600_000
