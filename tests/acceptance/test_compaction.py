"""Topic compaction with the official client (pulsar-client 3.x) against a real standalone.

- a reader and a consumer with read_compacted=True get the compacted view (the latest value per
  key, tombstoned keys gone) and then the tail after the horizon; a plain reader gets everything;
- read_compacted on a Shared subscription is refused, as Pulsar;
- a topic whose messages have no key: the run succeeds, writes nothing and says so (REST status
  `message`, CLI `compaction-status`);
- a second PUT while a run is in progress answers 409;
- `strata admin topics compact` / `compaction-status -w` end to end, and the compactionThreshold
  policy: set on the namespace, a topic past it is compacted by the broker on its own;
- a chunked message (chunking_enabled, a payload over the broker's max message size) that is its
  key's latest value is kept whole, every chunk, also through an incremental run; one superseded
  or tombstoned leaves nothing behind;
- many keys with 10% tombstones: a compacted reader gets exactly the live keys (100k keys in make
  test; 1M keys under the `slow` marker).
"""

from __future__ import annotations

import time

import pulsar
import pytest

from tests.acceptance.conftest import make_client
from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call, topic_get
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.split("://", 1)[1]


def compact(sa: StandaloneProcess, topic: str, timeout_s: float = 120.0) -> dict:
    code, body = admin_call(sa.admin_url, "PUT", _path(topic) + "/compaction")
    assert code == 204, (code, body)
    return wait_done(sa, topic, timeout_s)


def wait_done(sa: StandaloneProcess, topic: str, timeout_s: float) -> dict:
    status: dict = {}

    def done() -> bool:
        nonlocal status
        status = admin_call(sa.admin_url, "GET", _path(topic) + "/compaction")[1]
        return status.get("status") in ("SUCCESS", "ERROR")

    wait_until(done, timeout_s, "compaction finished", interval_s=0.2)
    assert status["status"] == "SUCCESS", status
    return status


def read_all(reader: pulsar.Reader, timeout_ms: int = 5000) -> list[tuple[str, bytes]]:
    out = []
    while reader.has_message_available():
        msg = reader.read_next(timeout_ms)
        out.append((msg.partition_key(), msg.data()))
    return out


def test_reader_and_consumer_read_compacted_then_the_tail(standalone, client, topic) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(30):
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 5}")
    producer.send(b"", partition_key="k2")                  # tombstone
    compact(standalone, topic)
    producer.send(b"after", partition_key="k0")
    expected_view = [("k1", b"v26"), ("k3", b"v28"), ("k4", b"v29")]   # k0 was superseded by the tail
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert read_all(reader) == [("k0", b"v25"), *expected_view, ("k0", b"after")]
    reader.close()
    plain = client.create_reader(topic, pulsar.MessageId.earliest)
    assert len(read_all(plain)) == 32
    plain.close()
    consumer = client.subscribe(topic, "compacted-sub", is_read_compacted=True,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = []
    for _ in range(5):
        msg = consumer.receive(5000)
        consumer.acknowledge(msg)
        got.append((msg.partition_key(), msg.data()))
    assert got == [("k0", b"v25"), *expected_view, ("k0", b"after")]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)
    consumer.close()
    with pytest.raises(pulsar.InvalidConfiguration):   # the client refuses read-compacted Shared itself
        client.subscribe(topic, "shared-compacted", consumer_type=pulsar.ConsumerType.Shared,
                         is_read_compacted=True)


def test_a_topic_whose_keys_are_all_tombstoned_compacts_to_nothing(standalone, client, topic) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"v", partition_key="k")
    producer.send(b"", partition_key="k")
    status = compact(standalone, topic)
    assert "0 key(s)" in status["message"] and "1 tombstone(s)" in status["message"], status
    assert "has a key" not in status["message"], status         # they all had one
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert read_all(reader) == []
    reader.close()


def test_chunked_messages_are_kept_whole(standalone, client, topic) -> None:
    big = bytes(range(256)) * (6 * 4096)                   # 6 MiB: more than one chunk
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    producer.send(b"a0", partition_key="a")
    producer.send(big, partition_key="a")                   # the latest of a: chunked
    producer.send(big[::-1], partition_key="b")
    producer.send(b"b1", partition_key="b")                 # supersedes a chunked value
    producer.send(big, partition_key="c")
    producer.send(b"", partition_key="c")                   # tombstones a chunked value
    status = compact(standalone, topic)
    assert "2 key(s)" in status["message"], status
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert read_all(reader) == [("a", big), ("b", b"b1")]
    reader.close()
    producer.send(b"b2", partition_key="b")
    compact(standalone, topic)                              # incremental: a's chunks come from the view
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert read_all(reader) == [("a", big), ("b", b"b2")]
    reader.close()


def test_a_topic_without_keys_has_nothing_to_compact(standalone, client, topic) -> None:
    producer = client.create_producer(topic)
    for i in range(12):
        producer.send(f"m{i}".encode())
    producer.flush()
    status = compact(standalone, topic)
    assert "nothing to compact" in status["message"] and "has a key" in status["message"], status
    assert topic_get(standalone.admin_url, topic, "internalStats")["compactedLedger"]["ledgerId"] == -1
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert read_all(reader) == []
    reader.close()


def test_cli_compact_and_status(standalone, client, topic, capsys) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(b"x", partition_key=f"k{i % 4}")
    url = ["--admin-url", standalone.admin_url]
    assert run_admin([*url, "topics", "compaction-status", topic]) == 0
    assert "has not been run" in capsys.readouterr().out
    assert run_admin([*url, "topics", "compact", topic]) == 0
    assert "Topic compaction requested" in capsys.readouterr().out
    assert run_admin([*url, "topics", "compaction-status", "-w", topic]) == 0
    out = capsys.readouterr().out
    assert "Compaction was a success" in out and "4 key(s)" in out, out
    empty = topic + "-nokeys"
    client.create_producer(empty).send(b"no key")
    assert run_admin([*url, "topics", "compact", empty]) == 0
    wait_done(standalone, empty, 30)
    capsys.readouterr()
    assert run_admin([*url, "topics", "compaction-status", empty]) == 0
    assert "nothing to compact" in capsys.readouterr().out


def test_compaction_threshold_policy_compacts_on_its_own(tmp_path) -> None:
    env = {"STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "500"}
    with StandaloneProcess.start(tmp_path / "data", env=env) as sa:
        url = ["--admin-url", sa.admin_url]
        assert run_admin([*url, "namespaces", "set-compaction-threshold", "-t", "1K", "public/default"]) == 0
        assert admin_call(sa.admin_url, "GET", "/admin/v2/namespaces/public/default/compactionThreshold") == (200, 1024)
        assert admin_call(sa.admin_url, "GET", "/admin/v2/namespaces/public/default")[1]["compaction_threshold"] == 1024
        assert admin_call(sa.admin_url, "PUT", "/admin/v2/namespaces/public/default/compactionThreshold", -1)[0] == 412
        client = make_client(sa.service_url)
        try:
            topic = "persistent://public/default/threshold"
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(40):
                producer.send(b"y" * 100, partition_key=f"k{i % 3}")

            def compacted() -> bool:
                return topic_get(sa.admin_url, topic, "internalStats")["compactedLedger"]["entries"] == 3

            wait_until(compacted, 30, "automatic compaction")
            assert "__compaction" in topic_get(sa.admin_url, topic, "stats")["subscriptions"]
        finally:
            client.close()
        assert run_admin([*url, "namespaces", "remove-compaction-threshold", "public/default"]) == 0
        assert admin_call(sa.admin_url, "GET", "/admin/v2/namespaces/public/default/compactionThreshold") == (200, None)


def _many_keys(standalone: StandaloneProcess, client: pulsar.Client, topic: str, keys: int,
               value_bytes: int) -> None:
    """`keys` keys written twice, then 10% of them tombstoned; a compacted reader gets exactly
    the live ones with their second value."""
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=10, max_pending_messages=20_000,
                                      block_if_queue_full=True)
    pad = b"p" * max(0, value_bytes - 12)
    for round_ in range(2):
        for k in range(keys):
            producer.send_async(b"%d-%d" % (round_, k) + pad, None, partition_key=str(k))
    dead = set(range(0, keys, 10))
    for k in sorted(dead):
        producer.send_async(b"", None, partition_key=str(k))
    producer.flush()
    started = time.monotonic()
    assert admin_call(standalone.admin_url, "PUT", _path(topic) + "/compaction")[0] == 204
    again = admin_call(standalone.admin_url, "PUT", _path(topic) + "/compaction")
    assert again == (409, {"reason": "Compaction already in progress"})
    wait_done(standalone, topic, 1800)
    took_s = time.monotonic() - started
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True,
                                  receiver_queue_size=5000)
    seen: dict[str, bytes] = {}
    while reader.has_message_available():
        msg = reader.read_next(10_000)
        assert msg.partition_key() not in seen
        seen[msg.partition_key()] = msg.data()
    reader.close()
    assert len(seen) == keys - len(dead), took_s
    assert all(seen[str(k)].startswith(b"1-%d" % k) for k in range(keys) if k not in dead)
    assert not any(str(k) in seen for k in dead)


def test_100k_keys_with_10_percent_tombstones(standalone, client, topic) -> None:
    """The property of the slow 1M run below, in `make test`: the compactor has no path that only
    a larger topic takes (every key is held in memory up to compaction_keys_max, 5M)."""
    _many_keys(standalone, client, topic, 100_000, 16)


@pytest.mark.slow
@pytest.mark.timeout(2000)   # above wait_done's own 1800 s bound
def test_1m_keys_with_10_percent_tombstones(standalone, client, topic) -> None:
    _many_keys(standalone, client, topic, 1_000_000, 100)


def test_a_partitioned_topic_compacts_every_partition(standalone, client, topic) -> None:
    code, body = admin_call(standalone.admin_url, "PUT", _path(topic) + "/partitions", 3)
    assert code == 204, body
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(60):
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 12}")
    compact(standalone, topic)
    status = admin_call(standalone.admin_url, "GET", _path(topic) + "/compaction")[1]
    assert set(status["partitions"]) == {"0", "1", "2"}
    assert all(s["status"] == "SUCCESS" for s in status["partitions"].values())
    assert status["message"].startswith("partition 0: compacted up to "), status     # which run said what
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert dict(read_all(reader)) == {f"k{k}": f"v{48 + k}".encode() for k in range(12)}
    reader.close()
