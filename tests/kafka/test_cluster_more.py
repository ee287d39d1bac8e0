"""More Kafka clients on a real two-broker cluster: kafka-python, kafkajs (node scripts in js/) and kcat
each produce to a topic whose partitions are owned by both brokers and read every partition back. A
client only gets there by sending each partition's requests to the leader Metadata names (the
partition's Pulsar owner); confluent-kafka and aiokafka are in test_cluster_clients.py.

One cluster for the module (conftest `kafka_cluster`); each test makes its own spread topic.
"""

from __future__ import annotations

import json

import pytest

from tests.kafka.helpers import Rec, assert_offsets_increase, assert_same_records, kcat, now_ms
from tests.kafka.test_cluster_clients import PARTITIONS, spread_topic
from tests.kafka.test_kafka_python import KafkaPython
from tests.kafka.test_kafkajs import KafkaJS
from tests.kafka.test_kcat import BIN_HEADER, DELIM, KEY_DELIM
from tests.support.cluster_proc import LocalCluster

PER_PARTITION = 4


def kcat_rec(line: str) -> Rec:
    """One line of kcat -J read with surrogateescape: kcat writes header values' bytes raw (not JSON
    escaped), so a non-UTF-8 header comes back byte for byte only this way."""
    d = json.loads(line)
    raw = lambda s: s.encode("utf-8", "surrogateescape")
    h = d.get("headers") or []
    headers = tuple((h[i], raw(h[i + 1])) for i in range(0, len(h), 2))
    key = None if d.get("key") is None else raw(d["key"])
    return Rec(key, raw(d["payload"]), headers, int(d["ts"]), int(d["partition"]), int(d["offset"]))


def partitioned_records(null_header: bool) -> list[Rec]:
    """PER_PARTITION records for every partition, each naming its partition in key and value."""
    base = now_ms() - 60_000
    out: list[Rec] = []
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            headers: tuple[tuple[str, bytes | None], ...] = (("h-text", f"p{p}-{i}".encode()),
                                                             ("h-bin", BIN_HEADER + bytes([i])))
            if null_header:
                headers += (("h-null", None),)
            key = None if i == PER_PARTITION - 1 else f"key-p{p}-{i}".encode()
            out.append(Rec(key, f"value-p{p}-{i}-".encode() + bytes([0, 0xFF, p, i]), headers,
                           base + 10 * (p * PER_PARTITION + i), p))
    return out


@pytest.mark.parametrize("client_cls", [KafkaPython, KafkaJS], ids=["kafka-python", "kafkajs"])
def test_partitions_on_both_brokers_are_produced_and_read_back(kafka_cluster: LocalCluster, client_cls) -> None:
    topic, owners = spread_topic(kafka_cluster)
    client = client_cls(kafka_cluster.kafka_bootstrap)
    sent = partitioned_records(client.null_header)
    offsets = client.produce(topic, sent, compression="gzip", idempotent=True)
    assert len(offsets) == len(sent)
    sent = [Rec(r.key, r.value, r.headers, r.timestamp, r.partition, o) for r, o in zip(sent, offsets)]
    for p in range(PARTITIONS):
        mine = [r for r in sent if r.partition == p]
        got = client.consume(topic, p, ("earliest", 0), expect=len(mine))
        what = f"{client.name} partition {p} owned by {owners[p]}"
        assert_same_records(mine, got, what)
        assert [r.offset for r in got] == [r.offset for r in mine] == list(range(PER_PARTITION)), what


def test_kcat_partitions_on_both_brokers_are_produced_and_read_back(kafka_cluster: LocalCluster) -> None:
    """kcat -P to each partition in turn (idempotent, lz4), then kcat -C of each partition (-J)."""
    topic, owners = spread_topic(kafka_cluster)
    bootstrap = kafka_cluster.kafka_bootstrap
    before = now_ms()
    sent: dict[int, list[tuple[bytes, bytes]]] = {}
    for p in range(PARTITIONS):
        sent[p] = [(f"k-p{p}-{i}".encode(), f"kcat-p{p}-{i}\nline two".encode()) for i in range(PER_PARTITION)]
        stdin = DELIM.join(k + KEY_DELIM + v for k, v in sent[p])
        kcat(["-b", bootstrap, "-P", "-t", topic, "-p", str(p), "-z", "lz4", "-D", DELIM, "-K", KEY_DELIM,
              "-X", "enable.idempotence=true", "-H", f"h-text=p{p}".encode(), "-H", b"h-bin=" + BIN_HEADER],
             stdin=stdin)
    after = now_ms()
    for p in range(PARTITIONS):
        out = kcat(["-b", bootstrap, "-C", "-t", topic, "-p", str(p), "-o", "beginning", "-e", "-J"])
        got = [kcat_rec(line) for line in out.decode("utf-8", "surrogateescape").splitlines() if line.strip()]
        what = f"kcat partition {p} owned by {owners[p]}"
        for r in got:
            assert before - 1000 <= r.timestamp <= after + 1000, (what, r.timestamp, before, after)
        want = [Rec(k, v, (("h-text", f"p{p}".encode()), ("h-bin", BIN_HEADER)),
                    r.timestamp, p) for (k, v), r in zip(sent[p], got)]
        assert_same_records(want, got, what)
        assert [r.offset for r in got] == list(range(PER_PARTITION)), what
        assert_offsets_increase(got)
