"""`explain-storage` against a real standalone (with the session's SeaweedFS as its cold tier) and
the official pulsar client: each test builds one culprit and checks the diagnosis, and that the
decomposition sums exactly to the topic's storageSize (as `/stats` reports it).

Culprits: (a) one old unacked message pinning later consumed ledgers (alone, and co-pinned by
another subscription's backlog: acting on it alone frees nothing), (b) ack holes, (c)
retention by time and by size keeping consumed ledgers, (d) offloaded ledgers keeping a bookie
copy for the deletion lag, (e) the open ledger, and no subscription at all (awaiting the next
retention pass). Ledgers roll every 5 entries; the retention pass runs once an hour, so nothing
is trimmed while a test looks (the explanation says when it would be).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

import cli.admin
from tests.acceptance.conftest import make_client
from tests.broker.admin.test_offload_admin import http
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ROLLOVER_ENTRIES = 5
DELETION_LAG_MS = 14_400_000           # the broker default of offloadDeletionLagMs (4h)
WAIT_S = 30.0
_ids = itertools.count()
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "3600000"}


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    return s3_server.new_bucket()


@pytest.fixture(scope="module")
def sa(s3_server: Any, bucket: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    env = {**s3_server.standalone_env(bucket), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("explain") / "data", env=env) as standalone:
        yield standalone


@pytest.fixture
def client(sa: StandaloneProcess) -> Iterator[pulsar.Client]:
    c = make_client(sa.service_url)
    yield c
    c.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return f"persistent://public/default/{request.node.originalname.replace('_', '-')}-{os.getpid()}-{next(_ids)}"


def path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.split("://", 1)[1]


def produce(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    try:
        return [producer.send(b"m-%04d-" % i + os.urandom(100)) for i in range(count)]
    finally:
        producer.close()


def consume(client: pulsar.Client, topic: str, subscription: str, count: int, ack: Any) -> pulsar.Consumer:
    """Receive `count` messages and ack those for which `ack(index)` is true."""
    consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest)
    for i in range(count):
        message = consumer.receive(10_000)
        if ack(i):
            consumer.acknowledge(message)
    return consumer


def wait_backlog(sa: StandaloneProcess, topic: str, subscription: str, entries: int) -> None:
    def reached() -> bool:
        stats = http(sa, "GET", path(topic) + "/stats")[1]
        assert isinstance(stats, dict)
        return stats["subscriptions"][subscription]["msgBacklog"] == entries
    wait_until(reached, WAIT_S, f"backlog of {subscription} at {entries}")


def explain(sa: StandaloneProcess, topic: str) -> dict:
    """The explanation; checks it adds up to the topic's storageSize as /stats reports it."""
    status, doc = http(sa, "GET", path(topic) + "/explain-storage")
    assert status == 200, doc
    assert isinstance(doc, dict)
    stats = http(sa, "GET", path(topic) + "/stats")[1]
    assert isinstance(stats, dict)
    assert sum(part["size"] for part in doc["decomposition"]) == doc["storageSize"] == stats["storageSize"]
    assert sum(ledger["size"] for ledger in doc["ledgers"]) == doc["storageSize"]
    for ledger in doc["ledgers"]:
        assert sum(ledger["parts"].values()) == ledger["size"]
    return doc


def parts(doc: dict) -> dict[str, int]:
    return {part["category"]: part["size"] for part in doc["decomposition"]}


def position(message_id: pulsar.MessageId) -> str:
    return f"{message_id.ledger_id()}:{message_id.entry_id()}"


def closed(doc: dict) -> list[dict]:
    return [ledger for ledger in doc["ledgers"][:-1] if ledger["entries"]]


# --- the culprits ------------------------------------------------------------------------------------

def test_one_old_unacked_message_pins_later_consumed_ledgers(sa, client, topic) -> None:
    ids = produce(client, topic, 4 * ROLLOVER_ENTRIES + 2)
    consumer = consume(client, topic, "pinned", len(ids), ack=lambda i: i > 0)
    wait_backlog(sa, topic, "pinned", 1)
    doc = explain(sa, topic)
    sub = doc["subscriptions"]["pinned"]
    assert (sub["msgBacklog"], sub["ackHoles"], sub["oldestUnacked"]) == (1, 1, position(ids[0]))
    first = doc["ledgers"][0]
    assert sub["oldestUnackedPublishMs"] == first["firstPublishMs"] > 0
    assert sub["pinnedLedgers"] == 4 and sub["pinnedAckedSize"] == parts(doc)["ackedButPinned"] > 0
    assert 0 < parts(doc)["unconsumedBacklog"] == sub["backlogSize"] == doc["backlogSize"]   # the one entry, exact
    for ledger in closed(doc):
        assert ledger["state"] == "closed" and ledger["location"]["bookies"] and ledger["location"]["s3"] is None
        [keeper] = ledger["keptBy"]
        assert (keeper["kind"], keeper["subscription"], keeper["ackHoles"]) == ("subscription", "pinned", 1)
        assert ledger["goesAtMs"] is None
        assert ledger["goes"].endswith(f"(its oldest unacked entry is {position(ids[0])})")
    assert doc["ledgers"][-1]["keptBy"][0]["kind"] == "open"
    assert doc["advice"][0].startswith(f"subscription pinned has 1 unacked message, the oldest {position(ids[0])} from")
    assert "pinning" in doc["advice"][0] and "in 4 ledgers (1 ack hole)" in doc["advice"][0]
    consumer.close()


def test_ack_holes_pin_acked_entries(sa, client, topic) -> None:
    ids = produce(client, topic, 4 * ROLLOVER_ENTRIES + 2)
    consumer = consume(client, topic, "holes", len(ids), ack=lambda i: i % 2 == 1 and i < 20)
    wait_backlog(sa, topic, "holes", 12)
    doc = explain(sa, topic)
    sub = doc["subscriptions"]["holes"]
    assert sub["ackHoles"] == 10                # 0, 2, ..., 18 below the highest ack (19)
    assert parts(doc)["ackedButPinned"] > 0 and parts(doc)["unconsumedBacklog"] > 0
    for ledger in closed(doc):
        [keeper] = ledger["keptBy"]
        assert keeper["subscription"] == "holes" and keeper["unackedEntries"] in (2, 3)
        assert set(ledger["parts"]) == {"unconsumedBacklog", "ackedButPinned"}
    assert any(line.startswith("subscription holes has 12 unacked messages") and "(10 ack holes)" in line
               for line in doc["advice"])
    consumer.close()


def test_a_culprit_co_pinned_by_another_subscription_frees_nothing_alone(sa, client, topic) -> None:
    # sub-excl has read nothing; sub-shared acked all but the first message. Acking that one alone
    # frees nothing (sub-excl's backlog holds the same ledgers); the advice says so and names it.
    ids = produce(client, topic, 3 * ROLLOVER_ENTRIES + 2)
    client.subscribe(topic, "sub-excl", initial_position=pulsar.InitialPosition.Earliest).close()
    consumer = consume(client, topic, "sub-shared", len(ids), ack=lambda i: i > 0)
    wait_backlog(sa, topic, "sub-shared", 1)
    doc = explain(sa, topic)
    closed_bytes = sum(ledger["size"] for ledger in closed(doc))
    shared, excl = doc["subscriptions"]["sub-shared"], doc["subscriptions"]["sub-excl"]
    assert (shared["freeableSize"], shared["freeableWithCoKeepersSize"]) == (0, closed_bytes)
    assert [k["subscription"] for k in shared["coKeepers"]] == ["sub-excl"]
    assert [k["subscription"] for k in excl["coKeepers"]] == ["sub-shared"] and excl["freeableSize"] == 0
    assert doc["backlogSize"] == excl["backlogSize"] and doc["backlogSubscription"] == "sub-excl"
    [line] = [line for line in doc["advice"] if line.startswith("subscription sub-shared ")]
    assert "also held by sub-excl's backlog: acking, skipping or expiring it alone frees 0 B" in line
    assert "to free" not in line
    consumer.close()


@pytest.mark.parametrize("retention, words", [
    ({"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}, "retention 1h keeps"),
    ({"retentionTimeInMinutes": -1, "retentionSizeInMB": 1}, "retention 1 MB keeps"),
])
def test_retention_keeps_consumed_ledgers(sa, client, topic, retention, words) -> None:
    assert http(sa, "POST", path(topic) + "/retention", retention)[0] == 204
    ids = produce(client, topic, 4 * ROLLOVER_ENTRIES + 2)
    consume(client, topic, "all", len(ids), ack=lambda i: True).close()
    wait_backlog(sa, topic, "all", 0)
    doc = explain(sa, topic)
    kept = closed(doc)
    assert parts(doc)["retainedByPolicy"] == sum(ledger["size"] for ledger in kept) > 0
    assert parts(doc)["unconsumedBacklog"] == parts(doc)["ackedButPinned"] == 0
    for ledger in kept:
        assert [keeper["kind"] for keeper in ledger["keptBy"]] == ["retention"]
        if retention["retentionTimeInMinutes"] > 0:
            assert ledger["goesAtMs"] == ledger["lastPublishMs"] + 60 * 60_000
        else:
            assert ledger["goesAtMs"] is None and "grows past the retention size (1 MB)" in ledger["goes"]
    assert any(line.startswith(words) and "of consumed data in 4 ledgers" in line for line in doc["advice"])


def test_offloaded_ledgers_keep_a_bookie_copy_for_the_deletion_lag(sa, client, topic, bucket) -> None:
    assert http(sa, "POST", path(topic) + "/retention",
                {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})[0] == 204
    ids = produce(client, topic, 3 * ROLLOVER_ENTRIES + 1)
    consume(client, topic, "all", len(ids), ack=lambda i: True).close()
    wait_backlog(sa, topic, "all", 0)
    before = {"ledgerId": ids[-1].ledger_id(), "entryId": 0, "partitionIndex": -1}
    assert http(sa, "PUT", path(topic) + "/offload", before)[0] == 204
    wait_until(lambda: http(sa, "GET", path(topic) + "/offload")[1]["status"] == "SUCCESS", WAIT_S, "offload")
    doc = explain(sa, topic)
    offloaded = [ledger for ledger in doc["ledgers"] if ledger["state"] == "offloaded"]
    assert len(offloaded) == 3 and offloaded == closed(doc)
    for ledger in offloaded:
        where = ledger["location"]
        assert where["bookieCopy"] and where["bookies"]
        assert where["s3"]["bucket"] == bucket
        assert where["s3"]["key"].endswith(f"ledger-{ledger['ledgerId']:020d}.parquet")
        assert ledger["bookieCopyGoesAtMs"] == where["s3"]["offloadedMs"] + DELETION_LAG_MS
        assert [keeper["kind"] for keeper in ledger["keptBy"]] == ["retention", "offloadDeletionLag"]
    assert parts(doc)["offloaded"] == sum(ledger["size"] for ledger in offloaded)
    assert any("3 offloaded ledgers" in line and "keep a bookie copy for offloadDeletionLagMs (4h)" in line
               and f"s3://{bucket}" in line for line in doc["advice"])


def test_the_open_ledger_holds_what_was_consumed_since_the_last_rollover(sa, client, topic) -> None:
    ids = produce(client, topic, ROLLOVER_ENTRIES - 2)
    consume(client, topic, "all", len(ids), ack=lambda i: True).close()
    wait_backlog(sa, topic, "all", 0)
    doc = explain(sa, topic)
    [ledger] = doc["ledgers"]
    assert ledger["state"] == "open" and ledger["entries"] == len(ids)
    assert parts(doc)["openLedger"] == doc["storageSize"] > 0
    assert [p["percent"] for p in doc["decomposition"] if p["category"] == "openLedger"] == [100.0]
    assert ledger["goes"].startswith(f"at rollover (after {ROLLOVER_ENTRIES} entries")
    assert any(line.startswith(f"the open ledger {ledger['ledgerId']} holds") for line in doc["advice"])


def test_no_subscription_leaves_ledgers_to_the_next_retention_pass(sa, client, topic) -> None:
    produce(client, topic, 2 * ROLLOVER_ENTRIES + 1)
    doc = explain(sa, topic)
    assert doc["subscriptions"] == {} and doc["backlogSize"] == 0
    assert parts(doc)["awaitingTrim"] == sum(ledger["size"] for ledger in closed(doc)) > 0
    for ledger in closed(doc):
        assert [keeper["kind"] for keeper in ledger["keptBy"]] == ["nothing"]
        assert ledger["goes"].startswith("at the next retention pass")
    assert any(line.startswith("no subscription: nothing reads the topic; 2 ledgers") and "are trimmed" in line
               and "every 1h" in line for line in doc["advice"])


# --- the REST edges and the CLI ---------------------------------------------------------------------

def test_unknown_topic_is_404(sa) -> None:
    assert http(sa, "GET", path(f"persistent://public/default/never-{time.time_ns()}") + "/explain-storage") \
        == (404, {"reason": "Topic not found"})


def test_partitioned_topic_answers_per_partition(sa, client, topic) -> None:
    assert http(sa, "PUT", path(topic) + "/partitions", 2)[0] == 204
    produce(client, topic, 4)
    status, doc = http(sa, "GET", path(topic) + "/explain-storage")
    assert status == 200 and isinstance(doc, dict)
    assert doc["topic"] == topic and sorted(doc["partitions"]) == [f"{topic}-partition-{i}" for i in range(2)]
    assert sum(p["storageSize"] for p in doc["partitions"].values()) > 0


def test_cli_prints_json_and_tables(sa, client, topic, capsys) -> None:
    ids = produce(client, topic, 2 * ROLLOVER_ENTRIES + 1)
    consumer = consume(client, topic, "cli", len(ids), ack=lambda i: i > 0)
    wait_backlog(sa, topic, "cli", 1)
    capsys.readouterr()
    assert cli.admin.main(["--admin-url", sa.admin_url, "-o", "json", "topics", "explain-storage", topic]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["subscriptions"]["cli"]["oldestUnacked"] == position(ids[0])
    assert sum(part["size"] for part in doc["decomposition"]) == doc["storageSize"]
    assert cli.admin.main(["--admin-url", sa.admin_url, "topics", "explain-storage", topic]) == 0
    out = capsys.readouterr().out
    assert "ledgers, oldest first" in out and "acked but pinned" in out and "- subscription cli has 1" in out
    assert "subscription backlog " in out and "(cli)" in out and "unconsumed by some subscription" in out
    consumer.close()
