"""Topic compaction against a real standalone (`broker.compaction`), driven through the admin API
and read back with the official client's read_compacted reader.

- the compacted view holds the latest value per key; a tombstone (empty payload) removes its key;
  messages without a key are left out of the view but the tail after the horizon is read whole;
- batches keep only their latest members (the mask goes out as the MESSAGE's ack_set);
- an incremental run reads the previous compacted ledger plus the tail: a new ledger replaces the
  old one, which is deleted, and the horizon moves on;
- the record survives a restart: the same view is served by the restarted broker;
- PUT while a run is in progress answers 409; an unknown topic 404;
- a broker killed in the middle of a run leaves no compacted ledger behind: the run named its new
  ledger as pending in the record, and the restarted broker deletes it.

Ledgers roll every 20 entries here, so the topics span several ledgers.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import time
from collections.abc import Iterator

import pulsar
import pytest

from broker.compaction.record import record_path
from common.topic_names import parse_topic
from ledger.ledger_metadata import ledger_path
from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call, topic_get
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "20", "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}
_ids = itertools.count()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("compaction") / "data", env=ENV) as sa:
        yield sa
        log = sa.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/compaction-{os.getpid()}-{next(_ids)}"


def client_of(sa: StandaloneProcess) -> pulsar.Client:
    return pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def path_of(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.split("://", 1)[1]


def compact(sa: StandaloneProcess, topic: str, timeout_s: float = 60.0) -> dict:
    """Trigger a compaction and wait for it to finish; its final status."""
    code, body = admin_call(sa.admin_url, "PUT", path_of(topic) + "/compaction")
    assert code == 204, (code, body)
    status: dict = {}

    def done() -> bool:
        nonlocal status
        code, status = admin_call(sa.admin_url, "GET", path_of(topic) + "/compaction")
        assert code == 200, status
        return status["status"] in ("SUCCESS", "ERROR")

    wait_until(done, timeout_s, "compaction finished")
    assert status["status"] == "SUCCESS", status
    return status


def read_compacted(client: pulsar.Client, topic: str, timeout_ms: int = 3000) -> list[tuple[str | None, bytes]]:
    """Everything a read_compacted reader from earliest gets: (key, value) in order."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    out = []
    try:
        while reader.has_message_available():
            msg = reader.read_next(timeout_ms)
            out.append((msg.partition_key() or None, msg.data()))
    finally:
        reader.close()
    return out


def check_storage_names_the_compacted_ledger(sa: StandaloneProcess, topic: str, compacted: dict) -> None:
    """storageSize counts the compacted ledger; explain-storage lists it, kept by "compaction",
    and its decomposition still sums to storageSize (CLI too)."""
    stats = topic_get(sa.admin_url, topic, "stats")
    internal = topic_get(sa.admin_url, topic, "internalStats")
    ml_bytes = sum(ledger["size"] for ledger in internal["ledgers"][:-1]) + internal["currentLedgerSize"]
    assert stats["storageSize"] == ml_bytes + compacted["size"]
    explained = topic_get(sa.admin_url, topic, "explain-storage")
    row = explained["ledgers"][-1]
    assert (row["ledgerId"], row["size"], row["keptBy"][0]["kind"]) == (compacted["ledgerId"], compacted["size"],
                                                                      "compaction")
    parts = {p["category"]: p["size"] for p in explained["decomposition"]}
    assert parts["compactedLedger"] == compacted["size"]
    assert sum(parts.values()) == explained["storageSize"] == stats["storageSize"]
    assert run_admin(["--admin-url", sa.admin_url, "topics", "explain-storage", topic]) == 0


def test_latest_value_per_key_and_tombstones(standalone, topic) -> None:
    client = client_of(standalone)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for round_ in range(3):
            for k in range(10):
                producer.send(f"v{round_}-{k}".encode(), partition_key=f"k{k}")
        producer.send(b"", partition_key="k3")           # tombstone
        producer.send(b"no key")                          # left out of the view
        producer.send(b"v3-5", partition_key="k5")
        status = compact(standalone, topic)
        assert "10 key(s)" not in status["message"] and "9 key(s)" in status["message"], status
        got = read_compacted(client, topic)
        expected = {f"k{k}": f"v2-{k}".encode() for k in range(10) if k not in (3, 5)}
        expected["k5"] = b"v3-5"
        assert dict(got) == expected
        assert [k for k, _ in got] == [f"k{k}" for k in range(10) if k not in (3, 5)] + ["k5"]   # topic order
        stats = topic_get(standalone.admin_url, topic, "internalStats")
        assert stats["compactedLedger"]["ledgerId"] >= 0 and stats["compactedLedger"]["entries"] == 9
        assert "__compaction" in stats["cursors"]
        check_storage_names_the_compacted_ledger(standalone, topic, stats["compactedLedger"])
        producer.send(b"tail", partition_key="k1")        # the tail after the horizon is read as is
        producer.send(b"tail no key")
        got = read_compacted(client, topic)
        assert got[-2:] == [("k1", b"tail"), (None, b"tail no key")]
        assert ("k1", b"v2-1") in got                     # the view still has k1's compacted value
    finally:
        client.close()


def test_batches_keep_only_their_latest_members(standalone, topic) -> None:
    client = client_of(standalone)
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                          batching_max_publish_delay_ms=50)
        for i in range(200):
            producer.send_async(f"v{i}".encode(), None, partition_key=f"k{i % 30}")
        producer.flush()
        for k in range(0, 30, 3):
            producer.send_async(b"", None, partition_key=f"k{k}")
        producer.flush()
        compact(standalone, topic)
        got = read_compacted(client, topic)
        expected = {f"k{i % 30}": f"v{i}".encode() for i in range(200)}
        for k in range(0, 30, 3):
            del expected[f"k{k}"]
        assert dict(got) == expected and len(got) == len(expected)
    finally:
        client.close()


def test_incremental_run_replaces_the_ledger_and_restart_keeps_the_view(standalone, topic) -> None:
    client = client_of(standalone)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(50):
            producer.send(f"a{i}".encode(), partition_key=f"k{i % 10}")
        compact(standalone, topic)
        first = topic_get(standalone.admin_url, topic, "internalStats")["compactedLedger"]
        for i in range(5):
            producer.send(f"b{i}".encode(), partition_key=f"k{i}")
        producer.send(b"", partition_key="k9")
        status = compact(standalone, topic)
        # the second run read the 10 compacted entries and the 6 new ones, not all 56
        assert "from 16 message(s) read" in status["message"], status
        second = topic_get(standalone.admin_url, topic, "internalStats")["compactedLedger"]
        assert second["ledgerId"] != first["ledgerId"] and second["entries"] == 9
        expected = {f"k{k}": (f"b{k}" if k < 5 else f"a{40 + k}").encode() for k in range(9)}
        assert dict(read_compacted(client, topic)) == expected
        producer.close()
    finally:
        client.close()
    unknown = f"/admin/v2/persistent/public/default/none-{time.time_ns()}/compaction"
    assert admin_call(standalone.admin_url, "GET", unknown)[0] == 404
    standalone.restart()
    assert topic_get(standalone.admin_url, topic, "internalStats")["compactedLedger"] == second
    code, status = admin_call(standalone.admin_url, "GET", path_of(topic) + "/compaction")
    assert (code, status["status"]) == (200, "NOT_RUN")
    client = client_of(standalone)
    try:
        assert dict(read_compacted(client, topic)) == expected
    finally:
        client.close()


def _stored(sa: StandaloneProcess, path: str) -> bytes | None:
    """A key of the standalone's metadata store, read straight from its SQLite file."""
    db = sqlite3.connect(f"file:{sa.data_dir / 'metadata.db'}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute("SELECT value FROM strata_keys WHERE path = ?", (path,)).fetchone()
    finally:
        db.close()
    return None if row is None else bytes(row[0])


def test_a_run_cut_short_by_a_crash_leaves_no_ledger(tmp_path) -> None:
    topic = f"persistent://public/default/crash-{os.getpid()}"
    with StandaloneProcess.start(tmp_path / "data") as sa:          # one ledger: nothing rolls or trims
        client = client_of(sa)
        try:
            producer = client.create_producer(topic, batching_max_messages=20, batching_max_publish_delay_ms=50,
                                              block_if_queue_full=True)
            for i in range(40_000):
                producer.send_async(f"v{i}".encode(), None, partition_key=f"k{i % 20_000}")
            producer.flush()
        finally:
            client.close()
        record_key = record_path(parse_topic(topic).managed_ledger_name)
        assert admin_call(sa.admin_url, "PUT", path_of(topic) + "/compaction")[0] == 204
        pending: list[int] = []

        def writing() -> bool:
            nonlocal pending
            raw = _stored(sa, record_key)
            pending = json.loads(raw).get("pending", []) if raw else []
            return bool(pending)

        wait_until(writing, 30, "the run names its new ledger as pending", interval_s=0.005)
        sa.kill9()
        assert json.loads(_stored(sa, record_key) or b"{}")["pending"] == pending   # killed mid-run
        assert _stored(sa, ledger_path(pending[0])) is not None
        sa.launch()
        internal = topic_get(sa.admin_url, topic, "internalStats")     # loads the topic
        assert internal["compactedLedger"]["ledgerId"] == -1
        record = json.loads(_stored(sa, record_key) or b"{}")
        assert (record["pending"], record["garbage"], record["installed"]) == ([], [], False)
        assert _stored(sa, ledger_path(pending[0])) is None
        status = compact(sa, topic)
        assert "20000 key(s)" in status["message"] and "from 40000 message(s)" in status["message"], status
