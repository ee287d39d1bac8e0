"""Stats that add up (issue 15 item 6), with the official client against a real standalone that
has a cold tier (the session's SeaweedFS, `s3_server`).

After each step — produce, consume, consumers closed, broker restart, offload, trim, unsubscribe —
topic stats and internalStats must agree:
- topic `msgInCounter` == messages ever produced == entries in the kept ledgers + entries of the
  ledgers trimmed so far (producers do not batch), and internalStats' `entriesAddedCounter` too;
  `bytesInCounter` == kept bytes + trimmed bytes;
- topic `msgOutCounter`/`bytesOutCounter` == the sum over its subscriptions + what removed
  subscriptions (a closed reader's, an unsubscribed one) had counted;
- each subscription's `msgBacklog` == entries after its cursor's `markDeletePosition` minus its
  `individuallyDeletedMessagesCount`;
- `storageSize` == the ledgers' sizes, the open one's as `currentLedgerSize`, offloaded included.
The trimmed ledgers are not taken from the broker's word: the test remembers every closed ledger
it saw in internalStats, and those that vanished are the trimmed ones.

Out counters are in memory and restart at 0 with the broker (as Pulsar's); in counters survive.
Ledgers roll every 5 entries; the topic keeps retention -1 until the trim step sets 0.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pulsar
import pytest

from tests.support.admin_http import admin_call, topic_get
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ROLLOVER_ENTRIES = 5
WAIT_S = 60.0
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0", "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200"}


@pytest.fixture(scope="module")
def sa(s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    env = {**s3_server.standalone_env(s3_server.new_bucket()), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("stats-identities") / "data", env=env) as standalone:
        yield standalone


def _client(sa: StandaloneProcess) -> pulsar.Client:
    return pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def _http(sa: StandaloneProcess, method: str, path: str, body: object = None) -> tuple[int, Any]:
    return admin_call(sa.admin_url, method, path, body)


def _get(sa: StandaloneProcess, topic: str, what: str) -> dict:
    return topic_get(sa.admin_url, topic, what)


def _until(what: str, probe: Callable[[], Any]) -> Any:
    """Poll `probe` until it returns something truthy (bounded by WAIT_S)."""
    return wait_until(probe, WAIT_S, what=what, interval_s=0.1)


def _position(text: str) -> tuple[int, int]:
    ledger_id, entry_id = text.split(":")[:2]
    return int(ledger_id), int(entry_id)


class Ledger:
    """What the test knows of a topic's storage: every closed ledger it has seen (id -> entries,
    bytes), so the ledgers trimmed since are those no longer listed."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, int]] = {}

    def kept(self, internal: dict) -> list[tuple[int, int, int]]:
        """(ledger id, entries, bytes) of every kept ledger; the last one's from current*."""
        ledgers = internal["ledgers"]
        out = [(x["ledgerId"], x["entries"], x["size"]) for x in ledgers[:-1]]
        if ledgers:
            out.append((ledgers[-1]["ledgerId"], internal["currentLedgerEntries"], internal["currentLedgerSize"]))
        for ledger_id, entries, size in out[:-1]:        # closed: final; remember them
            assert self.seen.setdefault(ledger_id, (entries, size)) == (entries, size), ledger_id
        return out

    def trimmed(self, kept: list[tuple[int, int, int]]) -> tuple[int, int]:
        ids = {ledger_id for ledger_id, _, _ in kept}
        gone = [v for k, v in self.seen.items() if k not in ids]
        return sum(e for e, _ in gone), sum(b for _, b in gone)


def check_identities(sa: StandaloneProcess, topic: str, ledger: Ledger, produced: int,
                     removed_out: tuple[int, int] = (0, 0)) -> tuple[dict, dict]:
    """Assert every identity on one quiescent topic; returns (stats, internalStats)."""
    internal = _get(sa, topic, "internalStats")
    stats = _get(sa, topic, "stats")
    kept = ledger.kept(internal)
    trimmed_entries, trimmed_bytes = ledger.trimmed(kept)
    kept_entries = sum(e for _, e, _ in kept)
    kept_bytes = sum(b for _, _, b in kept)
    assert stats["msgInCounter"] == produced == kept_entries + trimmed_entries, (stats, internal)
    assert internal["entriesAddedCounter"] == produced
    assert stats["bytesInCounter"] == kept_bytes + trimmed_bytes
    subs = stats["subscriptions"]
    assert stats["msgOutCounter"] == sum(s["msgOutCounter"] for s in subs.values()) + removed_out[0]
    assert stats["bytesOutCounter"] == sum(s["bytesOutCounter"] for s in subs.values()) + removed_out[1]
    assert set(internal["cursors"]) == set(subs)
    for name, cursor in internal["cursors"].items():
        mark_ledger, mark_entry = _position(cursor["markDeletePosition"])
        after = sum(entries if ledger_id > mark_ledger else max(0, entries - mark_entry - 1)
                    for ledger_id, entries, _ in kept if ledger_id >= mark_ledger)
        assert subs[name]["msgBacklog"] == after - cursor["individuallyDeletedMessagesCount"], (name, cursor)
    assert stats["storageSize"] == kept_bytes == internal["totalSize"]
    return stats, internal


def _backlogs(sa: StandaloneProcess, topic: str, expected: dict[str, int]) -> bool:
    subs = _get(sa, topic, "stats")["subscriptions"]
    return {name: subs[name]["msgBacklog"] for name in expected if name in subs} == expected


def _produce(sa: StandaloneProcess, topic: str, first: int, count: int) -> None:
    client = _client(sa)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(first, first + count):
            producer.send(b"message-%05d-" % i + b"x" * (i % 13))
    finally:
        client.close()


def test_one_message_received_acked_and_closed_still_counts_out(sa: StandaloneProcess) -> None:
    """The new user's report: msgOutCounter was 0 once the consumer had closed."""
    topic = f"persistent://public/default/one-message-{os.getpid()}"
    client = _client(sa)
    try:
        consumer = client.subscribe(topic, "sub")
        client.create_producer(topic).send(b"hello")
        consumer.acknowledge(consumer.receive(10_000))
    finally:
        client.close()
    _until("the ack", lambda: _backlogs(sa, topic, {"sub": 0}))
    stats = _get(sa, topic, "stats")
    assert stats["msgInCounter"] == 1 and stats["bytesInCounter"] > 0
    assert stats["subscriptions"]["sub"]["consumers"] == []
    assert stats["subscriptions"]["sub"]["msgOutCounter"] == stats["msgOutCounter"] == 1
    assert stats["subscriptions"]["sub"]["bytesOutCounter"] == stats["bytesOutCounter"] > 0


def test_stats_add_up_through_consume_close_restart_offload_and_trim(sa: StandaloneProcess) -> None:
    topic = f"persistent://public/default/identities-{os.getpid()}"
    path = "/admin/v2/persistent/" + topic.split("://", 1)[1]
    keep_all = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert _http(sa, "POST", path + "/retention", keep_all)[0] == 204
    ledger = Ledger()
    client = _client(sa)
    client.subscribe(topic, "all").close()
    client.subscribe(topic, "holes").close()
    client.close()

    # produce: 32 messages, 6 full ledgers and 2 entries in the open one
    _produce(sa, topic, 0, 32)
    stats, _ = check_identities(sa, topic, ledger, 32)
    assert stats["msgOutCounter"] == 0 and stats["storageSize"] > 0

    # consume: "all" acks everything; "holes" acks 0..11 and 15, 18, 21; a reader reads all
    client = _client(sa)
    every = client.subscribe(topic, "all", consumer_type=pulsar.ConsumerType.Shared)
    holes = client.subscribe(topic, "holes", consumer_type=pulsar.ConsumerType.Shared)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    for i in range(32):
        every.acknowledge(every.receive(10_000))
        msg = holes.receive(10_000)
        if i < 12 or i in (15, 18, 21):
            holes.acknowledge(msg)
        reader.read_next(10_000)
    _until("the acks", lambda: _backlogs(sa, topic, {"all": 0, "holes": 17}))
    stats, internal = check_identities(sa, topic, ledger, 32)
    assert internal["cursors"]["holes"]["individuallyDeletedMessagesCount"] == 3
    assert stats["subscriptions"]["all"]["msgOutCounter"] == stats["subscriptions"]["holes"]["msgOutCounter"] == 32
    reader_name = next(n for n, s in stats["subscriptions"].items() if not s["isDurable"])
    reader_out = (stats["subscriptions"][reader_name]["msgOutCounter"],
                  stats["subscriptions"][reader_name]["bytesOutCounter"])
    assert reader_out[0] == 32

    # close: the consumers' counts stay with their subscriptions, the reader's with the topic
    client.close()
    _until("the consumers gone", lambda: all(not s["consumers"] and s["isDurable"]
                                             for s in _get(sa, topic, "stats")["subscriptions"].values()))
    closed, _ = check_identities(sa, topic, ledger, 32, removed_out=reader_out)
    for name in ("all", "holes"):
        assert closed["subscriptions"][name]["msgOutCounter"] == 32
        assert closed["subscriptions"][name]["bytesOutCounter"] == stats["subscriptions"][name]["bytesOutCounter"]
    assert closed["msgOutCounter"] == 3 * 32 and closed["bytesOutCounter"] > 0

    # restart: in counters come back from the ledgers, out counters start again at 0 (as Pulsar's)
    sa.restart()
    stats, _ = check_identities(sa, topic, ledger, 32)
    assert stats["msgOutCounter"] == 0 and stats["subscriptions"]["holes"]["msgBacklog"] == 17
    _produce(sa, topic, 32, 8)
    check_identities(sa, topic, ledger, 40)

    # offload every closed ledger: storage still counts them
    internal = _get(sa, topic, "internalStats")
    before = {"ledgerId": internal["ledgers"][-1]["ledgerId"], "entryId": 0, "partitionIndex": -1}
    assert _http(sa, "PUT", path + "/offload", before)[0] == 204
    status = _until("the offload", lambda: (s := _http(sa, "GET", path + "/offload")[1])["status"] != "RUNNING" and s)
    assert status["status"] == "SUCCESS", status
    stats, internal = check_identities(sa, topic, ledger, 40)
    assert any(x["offloaded"] for x in internal["ledgers"]) and stats["offloadedStorageSize"] > 0

    # trim: retention 0 lets the ledgers before "holes"' mark-delete (entry 11) go
    assert _http(sa, "POST", path + "/retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})[0] == 204
    _until("a trim", lambda: ledger.trimmed(ledger.kept(_get(sa, topic, "internalStats")))[0] > 0)
    stats, internal = check_identities(sa, topic, ledger, 40)
    assert ledger.trimmed(ledger.kept(internal))[0] == 2 * ROLLOVER_ENTRIES

    # consume the 8 new ones on "all", then unsubscribe it: the topic keeps its out counts
    client = _client(sa)
    try:
        every = client.subscribe(topic, "all", consumer_type=pulsar.ConsumerType.Shared)
        for _ in range(8):
            every.acknowledge(every.receive(10_000))
        _until("the acks", lambda: _backlogs(sa, topic, {"all": 0}))
        sub = _get(sa, topic, "stats")["subscriptions"]["all"]
        gone = (sub["msgOutCounter"], sub["bytesOutCounter"])
        assert gone[0] == 8
        every.unsubscribe()
    finally:
        client.close()
    stats, _ = check_identities(sa, topic, ledger, 40, removed_out=gone)
    assert set(stats["subscriptions"]) == {"holes"} and stats["msgOutCounter"] == 8


def test_batched_in_counters_count_messages_and_survive_a_restart(sa: StandaloneProcess) -> None:
    """With batches, `msgInCounter` counts messages and `entriesAddedCounter` entries; both come
    back after a restart (the open ledger's from its recovered entries)."""
    topic = f"persistent://public/default/batched-{os.getpid()}"
    client = _client(sa)
    try:
        client.subscribe(topic, "keep").close()
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=4,
                                          batching_max_publish_delay_ms=50)
        for round_ in range(6):
            for i in range(4):
                producer.send_async(b"batched-%d-%d" % (round_, i), None)
            producer.flush()
    finally:
        client.close()

    def counters() -> tuple[int, int, int, int]:
        stats, internal = _get(sa, topic, "stats"), _get(sa, topic, "internalStats")
        entries = sum(x["entries"] for x in internal["ledgers"][:-1]) + internal["currentLedgerEntries"]
        assert stats["storageSize"] == sum(x["size"] for x in internal["ledgers"][:-1]) + internal["currentLedgerSize"]
        return stats["msgInCounter"], stats["bytesInCounter"], internal["entriesAddedCounter"], entries

    before = counters()
    assert before[0] == 24 and before[2] == before[3] < 24
    assert before[1] == _get(sa, topic, "stats")["storageSize"]
    sa.restart()
    assert counters() == before
