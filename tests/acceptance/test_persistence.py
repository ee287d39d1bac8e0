"""Restarts and crashes of the whole standalone lose nothing that was acknowledged.

Each test runs its own standalone (it restarts or kills it), with the official client.
"""

from __future__ import annotations

import json
import threading
import time

import pulsar
import pytest

from admin_client import request
from ledger.position import Position
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.support.standalone_proc import StandaloneProcess

TOPIC = "persistent://public/default/persistence"
# Cursors persist every 100 ms here (not 1 s), so the acks reach the store soon after the broker
# has them; the kill -9 test polls for both steps (see _wait_until_acks_persisted).
FAST_CURSOR_PERSIST_ENV = {"STRATA_CURSOR_PERSIST_INTERVAL_MS": "100"}
ACK_PERSIST_DEADLINE_S = 30.0
POLL_INTERVAL_S = 0.05


def _get(url: str) -> bytes:
    return request("GET", url, timeout_s=10).body


def _mark_delete(standalone: StandaloneProcess, subscription: str) -> Position | None:
    stats = json.loads(_get(f"{standalone.admin_url}/admin/v2/persistent/{TOPIC.split('://')[1]}/stats"))
    sub = stats.get("subscriptions", {}).get(subscription)
    return Position.parse(sub["markDeletePosition"]) if sub else None


def _cursor_persists(standalone: StandaloneProcess) -> int:
    for line in _get(f"{standalone.admin_url}/metrics").decode().splitlines():
        if line.startswith("strata_cursor_persists_total"):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError("no strata_cursor_persists_total in /metrics")


def _wait_until_acks_persisted(standalone: StandaloneProcess, subscription: str, last: Position,
                               persists_before: int) -> None:
    """Poll until the subscription's markDeletePosition (admin stats) covers `last` — the broker
    has the ack — and until a cursor persist has completed since `persists_before` (/metrics).
    The caller read `persists_before` while the cursor had nothing to persist and then sent one
    cumulative ack, so the first persist counted after it carries that ack. One deadline, no
    fixed sleep."""
    deadline = time.monotonic() + ACK_PERSIST_DEADLINE_S
    while (_mark_delete(standalone, subscription) or Position(-1, -1)) < last:
        assert time.monotonic() < deadline, f"markDeletePosition never reached {last}"
        time.sleep(POLL_INTERVAL_S)
    while _cursor_persists(standalone) <= persists_before:
        assert time.monotonic() < deadline, "the ack was never persisted"
        time.sleep(POLL_INTERVAL_S)


@pytest.fixture
def standalone(tmp_path):
    with StandaloneProcess.start(tmp_path / "data", env=FAST_CURSOR_PERSIST_ENV) as sa:
        yield sa


def test_consumption_resumes_exactly_after_the_last_ack_across_restart(standalone: StandaloneProcess) -> None:
    client = make_client(standalone.service_url)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    for i in range(20):
        producer.send(f"m{i}".encode())
    got = receive_all(consumer, 20, ack=False)
    for msg in got[:10] + [got[12], got[15]]:
        consumer.acknowledge(msg)
    client.close()  # closing flushes pending acks
    standalone.restart()
    client = make_client(standalone.service_url)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared)
    again = sorted(int(m.data()[1:]) for m in receive_all(consumer, 8))
    assert again == [10, 11, 13, 14, 16, 17, 18, 19]
    assert_no_more(consumer, 1000)
    producer = client.create_producer(TOPIC)
    producer.send(b"after-restart")
    assert consumer.receive(10_000).data() == b"after-restart"
    client.close()


def test_kill9_during_production_loses_no_acknowledged_message_and_no_ack(standalone: StandaloneProcess) -> None:
    client = make_client(standalone.service_url)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(TOPIC, send_timeout_millis=60_000)
    for i in range(50):
        producer.send(f"m{i}".encode())
    got = receive_all(consumer, 50, ack=False)
    persists_before = _cursor_persists(standalone)   # the cursor is clean: nothing acked yet
    consumer.acknowledge_cumulative(got[-1])
    last = got[-1].message_id()
    _wait_until_acks_persisted(standalone, "sub", Position(last.ledger_id(), last.entry_id()), persists_before)

    confirmed: set[bytes] = set()
    lock = threading.Lock()

    def on_sent(result, msg_id, payload) -> None:
        if result == pulsar.Result.Ok:
            with lock:
                confirmed.add(payload)

    sent: list[bytes] = []
    for i in range(50, 5000):
        payload = f"m{i}".encode()
        sent.append(payload)
        producer.send_async(payload, lambda r, m, p=payload: on_sent(r, m, p))
        if i % 50 == 0:
            time.sleep(0.01)   # the load's pace, so the kill lands mid-stream; not a wait
        with lock:
            if len(confirmed) >= 300:
                break
    standalone.kill9()
    with lock:
        confirmed_at_crash = set(confirmed)
    assert len(confirmed_at_crash) >= 300
    standalone.launch()
    client.close()

    client = make_client(standalone.service_url)
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    stored: list[bytes] = []
    while reader.has_message_available():
        stored.append(reader.read_next(10_000).data())
    assert confirmed_at_crash <= set(stored)
    assert set(stored) <= {f"m{i}".encode() for i in range(50)} | set(sent)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    first = consumer.receive(10_000)
    assert int(first.data()[1:]) >= 50, "an ack flushed before the crash was lost"
    client.close()


def test_consumption_crosses_ledger_rollovers_and_restarts(tmp_path) -> None:
    env = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "7", "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}
    with StandaloneProcess.start(tmp_path / "data", env=env) as sa:
        client = make_client(sa.service_url)
        consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Failover)
        producer = client.create_producer(TOPIC)
        ids = [producer.send(f"m{i}".encode()) for i in range(40)]
        assert len({m.ledger_id() for m in ids}) >= 5
        assert [m.data() for m in receive_all(consumer, 25)] == [f"m{i}".encode() for i in range(25)]
        client.close()
        sa.restart()
        client = make_client(sa.service_url)
        consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Failover)
        assert [m.data() for m in receive_all(consumer, 15)] == [f"m{i}".encode() for i in range(25, 40)]
        assert_no_more(consumer)
        reader = client.create_reader(TOPIC, ids[10])
        assert reader.read_next(10_000).data() == b"m11"
        client.close()


def test_three_bookie_standalone_uses_2_2_2_ledgers_and_survives_restart(tmp_path) -> None:
    from cli.standalone import quorums
    assert quorums(1) == (1, 1, 1) and quorums(3) == (2, 2, 2) and quorums(5) == (4, 2, 2)
    with StandaloneProcess.start(tmp_path / "data", bookies=3) as sa:
        client = make_client(sa.service_url)
        consumer = client.subscribe(TOPIC, "sub")
        producer = client.create_producer(TOPIC)
        for i in range(30):
            producer.send(f"m{i}".encode())
        receive_all(consumer, 10)
        client.close()
        sa.restart()
        client = make_client(sa.service_url)
        consumer = client.subscribe(TOPIC, "sub")
        assert [m.data() for m in receive_all(consumer, 20)] == [f"m{i}".encode() for i in range(10, 30)]
        client.close()
    from ledger.ledger_metadata import LedgerMetadata
    from metadata import open_store
    store = open_store(f"sqlite:///{tmp_path / 'data' / 'metadata.db'}")
    try:
        ledger_ids = store.children("/ledgers")
        assert ledger_ids
        for name in ledger_ids:
            meta = LedgerMetadata.from_json(store.get(f"/ledgers/{name}").value)
            assert (meta.ensemble_size, meta.write_quorum, meta.ack_quorum) == (2, 2, 2)
    finally:
        store.close()
