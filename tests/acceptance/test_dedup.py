"""Deduplication with the official client against a real standalone: the per-topic switch, explicit
duplicate sequence ids answered but not stored, resume after a restart and a kill -9 (snapshot +
replay), switching on and off mid-stream (nothing stored is lost), in-flight duplicates, and a
retry after a failed write (a hung bookie during a rollover) stored, not dropped
(apache/pulsar#5218)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pulsar
import pytest

from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.acceptance.test_admin import http
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command

# Small snapshot interval: a restart then restores a snapshot AND replays entries after it.
ENV = {"STRATA_BROKER_DEDUP_SNAPSHOT_INTERVAL_ENTRIES": "5"}


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("dedup") / "data", env=ENV) as proc:
        yield proc


def _dedup_url(sa: StandaloneProcess, topic: str) -> str:
    return f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/deduplicationEnabled"


def _stored(sa: StandaloneProcess, topic: str, expected: int) -> list[bytes]:
    """Every stored message of `topic`, read from the start; exactly `expected` of them."""
    client = make_client(sa.service_url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        got = [reader.read_next(10_000).data() for _ in range(expected)]
        with pytest.raises(pulsar.Timeout):
            reader.read_next(500)
        return got
    finally:
        client.close()


def test_topic_switch_overrides_namespace_and_falls_back(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    ns_url = f"{sa.admin_url}/admin/v2/namespaces/public/default/deduplication"
    assert http("GET", url) == (200, None)
    assert http("GET", url + "?applied=true") == (200, False)        # off by default
    assert http("POST", url, True)[0] == 204
    assert http("GET", url) == (200, True)
    assert http("POST", ns_url, False)[0] == 204
    assert http("GET", url + "?applied=true") == (200, True)         # the topic overrides
    assert http("DELETE", url)[0] == 204
    assert http("GET", url + "?applied=true") == (200, False)        # back to the namespace
    status, body = http("POST", url, "yes")
    assert status == 400 and "reason" in body


def test_explicit_duplicates_are_answered_and_not_stored(sa, topic: str) -> None:
    assert http("POST", _dedup_url(sa, topic), True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="dup-writer")
    assert producer.last_sequence_id() == -1
    for seq in range(5):
        producer.send(f"m{seq}".encode(), sequence_id=seq)
    duplicate = producer.send(b"again-2", sequence_id=2)
    assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
    producer.send(b"again-4", sequence_id=4)
    producer.send(b"m5", sequence_id=5)
    client.close()
    assert _stored(sa, topic, 6) == [f"m{i}".encode() for i in range(6)]


def test_resume_after_restart_and_kill9(sa, topic: str) -> None:
    assert http("POST", _dedup_url(sa, topic), True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="resumer")
    for i in range(12):                     # snapshots at 5 and 10, then 2 entries to replay
        producer.send(f"m{i}".encode())
    client.close()
    for crash in (False, True):
        sa.restart(crash=crash)
        client = make_client(sa.service_url)
        producer = client.create_producer(topic, producer_name="resumer")
        last = producer.last_sequence_id()
        assert last == (11 if not crash else 12)
        duplicate = producer.send(b"dup", sequence_id=last)
        assert duplicate.entry_id() == -1
        producer.send(f"m{last + 1}".encode())        # the client continues at last + 1
        client.close()
    assert _stored(sa, topic, 14) == [f"m{i}".encode() for i in range(14)]


def test_switching_mid_stream_loses_nothing(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="switcher")
    producer.send(b"a0", sequence_id=0)
    producer.send(b"a1", sequence_id=1)
    producer.send(b"a1-again", sequence_id=1)        # off: stored
    assert http("POST", url, True)[0] == 204          # on, with the producer connected
    producer.send(b"b1", sequence_id=1)               # stored before the switch: not known
    producer.send(b"b2", sequence_id=2)
    assert producer.send(b"b2-again", sequence_id=2).entry_id() == -1
    assert producer.send(b"b1-again", sequence_id=1).entry_id() == -1
    assert http("POST", url, False)[0] == 204         # off again
    producer.send(b"c2", sequence_id=2)               # stored: nothing is enforced any more
    client.close()
    assert _stored(sa, topic, 6) == [b"a0", b"a1", b"a1-again", b"b1", b"b2", b"c2"]


def test_new_producer_gets_last_sequence_id_only_while_enabled(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    assert http("POST", url, True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="seq-holder")
    for _ in range(3):
        producer.send(b"x")
    producer.close()
    assert client.create_producer(topic, producer_name="seq-holder").last_sequence_id() == 2
    assert http("POST", url, False)[0] == 204
    assert client.create_producer(topic, producer_name="seq-holder-2").last_sequence_id() == -1
    client.close()


def _send_frame(seq: int, payload: bytes) -> bytes:
    md = pb.MessageMetadata(producer_name="raw-inflight", sequence_id=seq, publish_time=int(time.time() * 1000))
    cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq))
    return encode_payload_command(cmd, build_entry(md, payload))


def test_in_flight_duplicate_gets_send_error_then_receipt(sa, topic: str) -> None:
    assert http("POST", _dedup_url(sa, topic), True)[0] == 204
    raw = RawClient(sa.port)
    try:
        raw.connect()
        assert raw.producer(topic).type == T.PRODUCER_SUCCESS
        raw.send_bytes(_send_frame(7, b"first") + _send_frame(7, b"second"))   # one socket write
        first, second = raw.next_command(), raw.next_command()
        assert first.type == T.SEND_RECEIPT and first.send_receipt.message_id.entryId == 0
        assert second.type == T.SEND_ERROR and second.send_error.sequence_id == 7
        assert second.send_error.error == pb.ServiceNotReady
        raw.send_message(1, 7, b"third", producer_name="raw-inflight")
        third = raw.next_command()
        assert third.type == T.SEND_RECEIPT and third.send_receipt.message_id.ledgerId == 2**64 - 1
    finally:
        raw.close()
    assert _stored(sa, topic, 1) == [b"first"]


def test_oversize_message_without_chunking_is_refused_and_nothing_is_lost(sa, topic: str) -> None:
    client = make_client(sa.service_url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"before")
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (6 * 1024 * 1024))
    producer.send(b"after")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"before", b"after"]
    assert_no_more(consumer)
    client.close()


def test_switched_off_while_unloaded_starts_afresh_when_on_again(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    assert http("POST", url, True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="afresh")
    for _ in range(3):
        producer.send(b"x")
    client.close()
    sa.restart()                                       # nobody has loaded the topic since
    assert http("POST", url, False)[0] == 204
    assert http("POST", url, True)[0] == 204
    client = make_client(sa.service_url)
    assert client.create_producer(topic, producer_name="afresh").last_sequence_id() == -1
    client.close()


# --- a retry after a failed write is stored (apache/pulsar#5218) ----------------------------------

ADD_TIMEOUT_MS = 2_000
APPEND_FAILED_DEADLINE_S = ADD_TIMEOUT_MS / 1000 + 30.0   # the add timeout, and a loaded machine
FAILING_ENV = {"STRATA_LEDGER_ADD_TIMEOUT_MS": str(ADD_TIMEOUT_MS),
               "STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": "5",
               "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}


def _bookie_pid(sa: StandaloneProcess) -> int:
    """The standalone's (only) bookie process: its child running `cli.main bookie`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == sa.pid and b"bookie" in argv:
            return int(entry.name)
    raise AssertionError("the standalone has no bookie process")


def _append_failed(sa: StandaloneProcess, topic: str, log_offset: int) -> bool:
    """The broker has logged an append to `topic` failing since `log_offset` of its log."""
    with open(sa.log_path, "rb") as log:
        log.seek(log_offset)
        return f"append to {topic} failed".encode() in log.read()


def test_a_retry_after_a_failed_write_is_stored_not_dropped(tmp_path: Path) -> None:
    """m0..m3 fill the first ledger up to one entry short of a rollover. With the bookie hung,
    m4 (the 5th entry, which starts the rollover) waits for an add that times out, while m5..m9
    wait for the new ledger. The bookie is resumed after m4's add failed but before anything
    queued behind it could time out: if m5..m9 were then stored, dedup would answer the client's
    resend of m4 as a duplicate and m4 would be lost. Every message must be stored exactly once,
    in order, and no receipt may be a duplicate's (-1, -1)."""
    topic = f"persistent://public/default/retry-after-failed-write-{os.getpid()}"
    with StandaloneProcess.start(tmp_path / "data", env=FAILING_ENV) as sa:
        assert http("POST", _dedup_url(sa, topic), True)[0] == 204
        client = make_client(sa.service_url, operation_timeout_seconds=60)
        try:
            producer = client.create_producer(topic, producer_name="retrier", batching_enabled=False,
                                              send_timeout_millis=120_000)
            for i in range(4):
                producer.send(b"m%d" % i)
            receipts: dict[int, tuple] = {}
            done = threading.Event()

            def sent(i: int, result, msg_id) -> None:
                receipts[i] = (result, msg_id.ledger_id(), msg_id.entry_id())
                if len(receipts) == 6:
                    done.set()

            bookie = _bookie_pid(sa)
            log_offset = sa.log_path.stat().st_size
            os.kill(bookie, signal.SIGSTOP)
            try:
                for i in range(4, 10):
                    producer.send_async(b"m%d" % i, lambda r, m, i=i: sent(i, r, m))
                wait_until(lambda: _append_failed(sa, topic, log_offset), APPEND_FAILED_DEADLINE_S,
                           what="the broker failing m4's append (add timeout)", interval_s=0.05)
            finally:
                os.kill(bookie, signal.SIGCONT)
            assert done.wait(120), f"sends did not complete: {receipts}"
            assert all(r[0] == pulsar.Result.Ok for r in receipts.values()), receipts
            assert all(r[1] >= 0 and r[2] >= 0 for r in receipts.values()), \
                f"a resend was answered as a duplicate: {receipts}"
            assert producer.last_sequence_id() == 9
        finally:
            client.close()
        assert _stored(sa, topic, 10) == [b"m%d" % i for i in range(10)]
