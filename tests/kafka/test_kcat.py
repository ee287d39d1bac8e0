"""kcat (librdkafka 2.0 in Debian's kcat 1.7) against Strata's Kafka listener: produce with each codec
(`-z`), idempotent (`-X enable.idempotence=true`) or not; consume with `-C -o` from the beginning, an
offset, a time (`s@<ms>`), relative to the end, and the end. kcat sets no record timestamps itself
(librdkafka stamps the send time) and writes values from stdin, headers from `-H name=value`.
Output is read as kcat's JSON (`-J`), so the consumed records here are text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.kafka.helpers import COMPRESSIONS, Rec, assert_same_records, create_partitioned, kcat, now_ms, unique_topic
from tests.kafka.test_confluent import Confluent

DELIM = b"\x1e\x1e"                    # between records on kcat's stdin (values hold newlines and NULs)
KEY_DELIM = b"\x1f\x1f"
BIN_HEADER = b"\xff\xfe\x80bin"       # not UTF-8; no NUL (a command-line argument cannot hold one)


def kcat_json(bootstrap: str, topic: str, offset: str, count: int | None = None) -> list[dict]:
    args = ["-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", offset, "-e", "-J"]
    if count is not None:
        args += ["-c", str(count)]
    return [json.loads(line) for line in kcat(args).decode().splitlines() if line.strip()]


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_every_compression_and_read_back(standalone, bootstrap: str, idempotent: bool) -> None:
    topic = unique_topic(f"kcat-rt-{idempotent}")
    create_partitioned(standalone.admin_url, topic, 1)
    sent: list[Rec] = []
    for compression in COMPRESSIONS:
        values = [f"kcat-{compression}-{i}\n".encode() + bytes([0, 0xFF, i]) for i in range(5)]
        keys = [f"k-{compression}-{i}".encode() for i in range(5)]
        headers = (("h-text", compression.encode()), ("h-bin", BIN_HEADER))
        stdin = DELIM.join(k + KEY_DELIM + v for k, v in zip(keys, values))
        before = now_ms()
        kcat(["-b", bootstrap, "-P", "-t", topic, "-p", "0", "-z", compression, "-D", DELIM, "-K", KEY_DELIM,
              "-X", f"enable.idempotence={'true' if idempotent else 'false'}",
              "-H", b"h-text=" + compression.encode(), "-H", b"h-bin=" + BIN_HEADER], stdin=stdin)
        after = now_ms()
        got = Confluent(bootstrap).consume(topic, 0, ("earliest", 0), expect=len(sent) + 5)[len(sent):]
        for r in got:
            assert before - 1000 <= r.timestamp <= after + 1000, (r.timestamp, before, after)
        sent += [Rec(k, v, headers, r.timestamp, 0) for k, v, r in zip(keys, values, got)]
        assert_same_records(sent[-5:], got, f"kcat -z {compression}")


@dataclass
class Seeded:
    topic: str
    recs: list[Rec]


@pytest.fixture(scope="module")
def seeded(standalone, bootstrap: str) -> Seeded:
    """12 text records with known times, written by confluent-kafka in 2 batches."""
    topic = unique_topic("kcat-modes")
    create_partitioned(standalone.admin_url, topic, 1)
    base = now_ms() - 300_000
    recs = [Rec(f"key{i}".encode(), f"value{i}".encode(), (("h", f"v{i}".encode()),), base + 100 * i, 0)
            for i in range(12)]
    producer = Confluent(bootstrap)
    offsets = producer.produce(topic, recs[:6], one_batch=True) + producer.produce(topic, recs[6:], one_batch=True)
    return Seeded(topic, [Rec(r.key, r.value, r.headers, r.timestamp, 0, o) for r, o in zip(recs, offsets)])


def from_json(d: dict) -> Rec:
    h = d.get("headers") or []
    headers = tuple((h[i], h[i + 1].encode()) for i in range(0, len(h), 2))
    key = None if d.get("key") is None else d["key"].encode()
    return Rec(key, d["payload"].encode(), headers, int(d["ts"]), int(d["partition"]), int(d["offset"]))


def test_consume_from_beginning(bootstrap: str, seeded: Seeded) -> None:
    got = [from_json(d) for d in kcat_json(bootstrap, seeded.topic, "beginning")]
    assert_same_records(seeded.recs, got, "kcat -o beginning")
    assert [r.offset for r in got] == [r.offset for r in seeded.recs]


def test_consume_from_an_offset_inside_a_batch(bootstrap: str, seeded: Seeded) -> None:
    got = [from_json(d) for d in kcat_json(bootstrap, seeded.topic, str(seeded.recs[3].offset))]
    assert_same_records(seeded.recs[3:], got, f"kcat -o {seeded.recs[3].offset}")


def test_consume_by_timestamp(bootstrap: str, seeded: Seeded) -> None:
    t = seeded.recs[8].timestamp - 50
    got = [from_json(d) for d in kcat_json(bootstrap, seeded.topic, f"s@{t}")]
    assert_same_records(seeded.recs[8:], got, f"kcat -o s@{t}")


def test_consume_relative_to_the_end_and_at_the_end(bootstrap: str, seeded: Seeded) -> None:
    topic = seeded.topic
    got = [from_json(d) for d in kcat_json(bootstrap, topic, "-2")]
    assert_same_records(seeded.recs[-2:], got, "kcat -o -2")
    assert kcat_json(bootstrap, topic, "end") == []
