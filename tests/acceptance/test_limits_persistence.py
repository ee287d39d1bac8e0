"""The storage policies enforced on a real standalone with three bookies and the official client
(`broker.topics.storage_policies`): persistence sets the quorums of a topic's next ledger (the
topic level over the namespace's) and spaces its cursors' persisted mark-delete writes while acks
still move at once; a bad persistence value is refused and changes nothing; a quorum the bookies
cannot meet fails the producer; deduplicationSnapshotInterval spaces dedup snapshots;
delayedDelivery off delivers delayed messages at once, and its max delay refuses a longer one.

Ledgers roll every few entries (`managed_ledger_rollover_entries`), so "the next ledger" comes
after a few sends; cursors may persist every 100 ms here, so a mark-delete rate of 1/s is seen.
Ledger metadata, cursor and dedup snapshot keys are read from the standalone's metadata store.
"""

from __future__ import annotations

import datetime
import itertools
import time
import urllib.request
from collections.abc import Callable, Iterator

import pulsar
import pytest
from prometheus_client.parser import text_string_to_metric_families

from common.topic_names import parse_topic
from entries.entry import build_entry
from ledger.ledger_metadata import LedgerMetadata, ledger_path
from ledger.ml_metadata import ml_path
from metadata import open_store
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client
from tests.support.admin_http import admin_call, topic_get
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command

ROLLOVER_ENTRIES = 3
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0", "STRATA_CURSOR_PERSIST_INTERVAL_MS": "100"}
_ids = itertools.count()


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("three") / "data", bookies=3, env=ENV) as sa:
        yield sa


@pytest.fixture(scope="module")
def store(three: StandaloneProcess):
    s = open_store(three.metadata_url)
    yield s
    s.close()


@pytest.fixture
def client(three: StandaloneProcess) -> Iterator[pulsar.Client]:
    c = make_client(three.service_url)
    yield c
    c.close()


def _namespace(sa: StandaloneProcess, body: object = None) -> str:
    ns = f"public/storage-{next(_ids)}"
    assert admin_call(sa.admin_url, "PUT", f"/admin/v2/namespaces/{ns}", body)[0] == 204
    return ns


def _wait(predicate: Callable[[], object], bound_s: float, what: str) -> None:
    deadline = time.monotonic() + bound_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {bound_s} s waiting for {what}"
        time.sleep(0.1)


def _last_quorum(sa: StandaloneProcess, store, topic: str) -> tuple[int, int, int]:
    stats = topic_get(sa.admin_url, topic, "internalStats")
    meta = LedgerMetadata.from_json(store.get(ledger_path(stats["ledgers"][-1]["ledgerId"])).value)
    return meta.ensemble_size, meta.write_quorum, meta.ack_quorum


def _rolls_to(sa: StandaloneProcess, store, producer: pulsar.Producer, topic: str,
              quorum: tuple[int, int, int]) -> None:
    """Send until the topic's newest ledger has `quorum` (the policy reaches the broker through
    its watch, then the next rollover picks it up)."""
    def rolled() -> bool:
        for _ in range(ROLLOVER_ENTRIES):
            producer.send(b"x")
        return _last_quorum(sa, store, topic) == quorum
    _wait(rolled, 20, f"a ledger with E/Qw/Qa {quorum}")


def _persistence(e: int, w: int, a: int, rate: float = 0.0) -> dict:
    return {"bookkeeperEnsemble": e, "bookkeeperWriteQuorum": w, "bookkeeperAckQuorum": a,
            "managedLedgerMaxMarkDeleteRate": rate}


def test_persistence_sets_the_quorums_of_the_next_ledger_topic_over_namespace(three, store, client) -> None:
    url = three.admin_url
    ns = _namespace(three)
    topic = f"persistent://{ns}/quorums"
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"first")
    assert _last_quorum(three, store, topic) == (2, 2, 2)          # the standalone's default on 3 bookies

    assert admin_call(url, "POST", f"/admin/v2/namespaces/{ns}/persistence", _persistence(3, 3, 2))[0] == 204
    _rolls_to(three, store, producer, topic, (3, 3, 2))
    rest = f"/admin/v2/persistent/{ns}/quorums"
    assert admin_call(url, "POST", f"{rest}/persistence", _persistence(1, 1, 1))[0] == 204
    _rolls_to(three, store, producer, topic, (1, 1, 1))             # the topic's own value wins
    assert admin_call(url, "DELETE", f"{rest}/persistence")[0] == 204
    _rolls_to(three, store, producer, topic, (3, 3, 2))             # back to the namespace's

    before = admin_call(url, "GET", f"{rest}/persistence?applied=true")
    status, answer = admin_call(url, "POST", f"{rest}/persistence", _persistence(2, 3, 1))
    assert status == 400 and answer["reason"] == "Bookkeeper Ensemble (2) >= WriteQuorum (3) >= AckQuorum (1)"
    assert admin_call(url, "GET", f"{rest}/persistence?applied=true") == before
    for _ in range(2 * ROLLOVER_ENTRIES):
        producer.send(b"y")
    assert _last_quorum(three, store, topic) == (3, 3, 2)           # nothing changed


def test_a_quorum_the_bookies_cannot_meet_holds_sends_until_it_is_lifted(three) -> None:
    url = three.admin_url
    ns = _namespace(three)
    topic = f"persistent://{ns}/loses-its-ledger"
    client = make_client(three.service_url, operation_timeout_seconds=3)
    try:
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
        producer.send(b"ok")
        assert admin_call(url, "POST", f"/admin/v2/namespaces/{ns}/persistence",
                          _persistence(4, 4, 4))[0] == 204          # accepted, as Pulsar accepts it
        time.sleep(0.5)
        results: list[pulsar.Result] = []
        count = 3 * ROLLOVER_ENTRIES
        for i in range(count):                                       # more than the open ledger takes
            producer.send_async(b"m%d" % i, lambda result, _id: results.append(result))
        _wait(lambda: "need at least 4 writable bookies" in three.log_path.read_text(errors="replace"), 20,
              "the broker to say why no ledger can be created")
        assert len(results) < count
        with pytest.raises(pulsar.PulsarException):                 # a topic loaded now has no ledger at all
            client.create_producer(f"persistent://{ns}/no-ledger", batching_enabled=False)

        assert admin_call(url, "DELETE", f"/admin/v2/namespaces/{ns}/persistence")[0] == 204
        _wait(lambda: len(results) == count, 30, "the held sends once the policy was lifted")
        assert set(results) == {pulsar.Result.Ok}
    finally:
        client.close()


def _ml_path(topic: str) -> str:
    return ml_path(parse_topic(topic).managed_ledger_name)


def _cursor_version(store, topic: str, sub: str) -> int:
    found = store.get(f"{_ml_path(topic)}/cursors/{sub}")
    return found.version if found is not None else 0


def _acks_then_writes(client: pulsar.Client, store, topic: str, seconds: float) -> tuple[int, int]:
    """Ack one message every 50 ms for `seconds`: (messages acked, cursor writes meanwhile)."""
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    time.sleep(0.5)
    start = _cursor_version(store, topic, "s")
    acked = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.send(b"m")
        consumer.acknowledge(consumer.receive(5000))
        acked += 1
        time.sleep(0.05)
    writes = _cursor_version(store, topic, "s") - start
    consumer.close()
    producer.close()
    return acked, writes


def test_the_mark_delete_rate_spaces_cursor_writes_while_acks_move_at_once(three, store, client) -> None:
    ns = _namespace(three)
    limited, free = f"persistent://{ns}/limited", f"persistent://{ns}/free"
    assert admin_call(three.admin_url, "POST", f"/admin/v2/persistent/{ns}/limited/persistence",
                      _persistence(2, 2, 2, rate=1.0))[0] == 204
    time.sleep(0.5)
    acked, writes = _acks_then_writes(client, store, limited, 3.0)
    stats = topic_get(three.admin_url, limited, "stats")
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0            # every ack applied at once
    acked_free, writes_free = _acks_then_writes(client, store, free, 3.0)
    print(f"limited: {acked} acks, {writes} writes; free: {acked_free} acks, {writes_free} writes")
    assert 1 <= writes <= 5                                         # about one a second
    assert writes_free >= 2 * writes


def _counter(sa: StandaloneProcess, name: str, **labels: str) -> float:
    """A counter's value on the broker's /metrics (0 when it has no such sample)."""
    with urllib.request.urlopen(f"{sa.admin_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def _snapshot_version(store, topic: str) -> int:
    found = store.get(f"{_ml_path(topic)}/dedup")
    return found.version if found is not None else -1


def test_the_dedup_snapshot_interval_is_the_topics(three, store, client) -> None:
    url = three.admin_url
    ns = _namespace(three)
    assert admin_call(url, "POST", f"/admin/v2/namespaces/{ns}/deduplication", True)[0] == 204
    fast, slow = f"persistent://{ns}/fast", f"persistent://{ns}/slow"
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/fast")[0] == 204
    assert admin_call(url, "POST", f"/admin/v2/persistent/{ns}/fast/deduplicationSnapshotInterval", 1)[0] == 204
    time.sleep(0.5)
    producers = [client.create_producer(t, batching_enabled=False) for t in (fast, slow)]
    start = [_snapshot_version(store, t) for t in (fast, slow)]
    counted = _counter(three, "strata_dedup_snapshots_total")
    for _ in range(12):
        for p in producers:
            p.send(b"d")
        time.sleep(0.3)
    grew = [_snapshot_version(store, t) - s for t, s in zip((fast, slow), start, strict=True)]
    assert grew[0] >= 2, grew                # about one snapshot a second
    assert grew[1] == 0, grew                # the broker's 60 s
    assert _counter(three, "strata_dedup_snapshots_total") - counted >= grew[0]    # and /metrics counts them


def test_delayed_delivery_off_delivers_at_once_and_max_delay_refuses(three, client) -> None:
    url = three.admin_url
    ns = _namespace(three)
    off, capped = f"persistent://{ns}/off", f"persistent://{ns}/capped"
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/off")[0] == 204
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/capped")[0] == 204
    assert admin_call(url, "POST", f"/admin/v2/persistent/{ns}/off/delayedDelivery",
                      {"active": False, "tickTime": 1000})[0] == 204
    assert admin_call(url, "POST", f"/admin/v2/namespaces/{ns}/delayedDelivery",
                      {"active": True, "tickTime": 100, "maxDeliveryDelayInMillis": 2000})[0] == 204
    time.sleep(0.5)

    consumer = client.subscribe(off, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(off, batching_enabled=False)
    sent_s = time.monotonic()
    producer.send(b"later", deliver_after=datetime.timedelta(seconds=30))
    msg = consumer.receive(5000)
    assert msg.data() == b"later" and time.monotonic() - sent_s < 5
    consumer.acknowledge(msg)

    consumer2 = client.subscribe(capped, "s", consumer_type=pulsar.ConsumerType.Shared)
    refusals = _counter(three, "strata_cap_refusals_total", policy="delayedDelivery")
    raw = RawClient(three.port)     # the refusal as it is on the wire (the C++ client resends it forever)
    try:
        raw.connect()
        assert raw.producer(capped, producer_id=7).type == T.PRODUCER_SUCCESS
        for seq, delay_ms in enumerate([30_000, 1_000]):
            now = int(time.time() * 1000)
            md = pb.MessageMetadata(producer_name="raw-delay", sequence_id=seq, publish_time=now,
                                    deliver_at_time=now + delay_ms)
            cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=7, sequence_id=seq))
            raw.send_bytes(encode_payload_command(cmd, build_entry(md, b"raw-%d" % seq)))
        refused, stored = raw.next_command(), raw.next_command()
    finally:
        raw.close()
    assert refused.type == T.SEND_ERROR and refused.send_error.error == pb.NotAllowedError
    assert refused.send_error.message.startswith("Exceeds max allowed delivery delay of 2000 milliseconds")
    assert stored.type == T.SEND_RECEIPT and stored.send_receipt.sequence_id == 1
    assert _counter(three, "strata_cap_refusals_total", policy="delayedDelivery") == refusals + 1
    producer = client.create_producer(capped, batching_enabled=False)
    producer.send(b"soon", deliver_after=datetime.timedelta(milliseconds=500))
    got = {consumer2.receive(5000).data() for _ in range(2)}
    assert got == {b"raw-1", b"soon"}
    assert topic_get(url, capped, "stats")["msgInCounter"] == 2    # the refused one was never stored
