"""Helpers for the tiered-storage acceptance tests (tests/acceptance/test_offload*.py).

- `Admin`: Pulsar's admin REST as the tests call it (offload, offload status, internal stats,
  stats, namespace offload policies); every call is bounded by HTTP_TIMEOUT_S.
- `produce_corpus`: a topic's worth of messages from several producers (none / LZ4 / ZSTD
  batches) with keys, properties and event times, each with the message id the broker gave it.
  Producers take turns by chunks, each chunk flushed, so publish times never decrease along
  the topic's message-id order (a seek by time has one right answer).
- `assert_same_messages`: what a consumer got equals what was sent, field by field, in order.
- `bookie_snapshot`: what the standalone's bookies hold (ListLedgers, GetInfo), asked over their
  own gRPC API at the ports the standalone recorded in `standalone.json`.
- `S3Access`: boto3 and pyarrow views of the bucket the standalone offloads to.

What must hold: nothing here waits without a bound, and nothing stands in for a component: the
checks talk to the real broker, bookies and S3 server.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulsar

from tests.support.admin_http import call
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.seaweed import TestSeaweed

HTTP_TIMEOUT_S = 30.0
SEND_TIMEOUT_S = 120.0
EVENT_TIME_BASE_MS = 1_700_000_000_000
TERMINAL_STATUSES = ("SUCCESS", "ERROR")
COMPRESSIONS = (("plain", pulsar.CompressionType.NONE), ("lz4", pulsar.CompressionType.LZ4),
                ("zstd", pulsar.CompressionType.ZSTD))


def http(method: str, url: str, body: object = None) -> tuple[int, Any]:
    """One admin call: (status, JSON body, or the raw text when it is not JSON, or None)."""
    return call(method, url, body, timeout_s=HTTP_TIMEOUT_S)


def topic_path(topic: str) -> str:
    """`persistent://t/ns/x` -> `t/ns/x`."""
    return topic.split("://", 1)[1]


class Admin:
    """Pulsar's admin REST paths on one broker."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url

    def topic_url(self, topic: str, what: str) -> str:
        return f"{self.admin_url}/admin/v2/persistent/{topic_path(topic)}/{what}"

    def ns_url(self, ns: str, what: str) -> str:
        return f"{self.admin_url}/admin/v2/namespaces/{ns}/{what}"

    def offload(self, topic: str, ledger_id: int, entry_id: int = 0) -> tuple[int, Any]:
        body = {"ledgerId": ledger_id, "entryId": entry_id, "partitionIndex": -1}
        return http("PUT", self.topic_url(topic, "offload"), body)

    def offload_status(self, topic: str) -> dict:
        status, body = http("GET", self.topic_url(topic, "offload"))
        assert status == 200, (status, body)
        return body

    def wait_offload_finished(self, topic: str, timeout_s: float) -> dict:
        """The status once it is SUCCESS or ERROR (bounded)."""
        found = wait_until(lambda: _terminal(self.offload_status(topic)), timeout_s,
                           what=f"the offload of {topic} to finish", interval_s=0.2)
        assert isinstance(found, dict)
        return found

    def internal_stats(self, topic: str) -> dict:
        status, body = http("GET", self.topic_url(topic, "internalStats"))
        assert status == 200, (status, body)
        return body

    def stats(self, topic: str) -> dict:
        status, body = http("GET", self.topic_url(topic, "stats"))
        assert status == 200, (status, body)
        return body

    def set_ns(self, ns: str, what: str, value: object) -> tuple[int, Any]:
        return http("PUT", self.ns_url(ns, what), value)

    def get_ns(self, ns: str, what: str) -> Any:
        status, body = http("GET", self.ns_url(ns, what))
        assert status == 200, (status, body)
        return body

    def ledgers(self, topic: str) -> list[dict]:
        """internalStats' ledgers[], oldest first (the last one is the open ledger)."""
        return list(self.internal_stats(topic)["ledgers"])


def _terminal(status: dict) -> dict | None:
    return status if status.get("status") in TERMINAL_STATUSES else None


def offloaded_ids(ledgers: list[dict]) -> set[int]:
    return {int(ledger["ledgerId"]) for ledger in ledgers if ledger.get("offloaded")}


# --- the messages -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sent:
    """One produced message and the id the broker acknowledged it with."""

    index: int
    payload: bytes
    key: str
    properties: dict[str, str]
    event_time_ms: int
    producer: str
    msg_id: tuple[int, int, int]          # (ledger, entry, batch index); -1 batch index if unbatched
    serialized_id: bytes


def id_of(mid: pulsar.MessageId) -> tuple[int, int, int]:
    return mid.ledger_id(), mid.entry_id(), mid.batch_index()


def _payload(rng: random.Random, index: int) -> bytes:
    """Some compressible text around a random core, 30..~600 bytes; every 997th is empty."""
    if index % 997 == 0:
        return b""
    text = b"message %d of the offload corpus; " % index
    return text * rng.randint(0, 8) + rng.randbytes(rng.randint(8, 200)) + text


def produce_corpus(client: pulsar.Client, topic: str, count: int, seed: int, *,
                   chunk: int = 500, batch_messages_max: int = 50,
                   payload_bytes: int | None = None) -> list[Sent]:
    """`count` messages, producers taking turns by `chunk` (flushed), in send order; payloads
    of `payload_bytes` random bytes each if given, else of mixed size and compressibility."""
    rng = random.Random(seed)
    producers = [client.create_producer(topic, producer_name=f"{name}-{seed}", compression_type=kind,
                                        batching_enabled=True, batching_max_messages=batch_messages_max,
                                        batching_max_publish_delay_ms=5, block_if_queue_full=True,
                                        send_timeout_millis=int(SEND_TIMEOUT_S * 1000))
                 for name, kind in COMPRESSIONS]
    ids: dict[int, pulsar.MessageId] = {}
    failures: list[tuple[int, object]] = []
    lock = threading.Lock()
    plans = []
    for first in range(0, count, chunk):
        producer = producers[(first // chunk) % len(producers)]
        for i in range(first, min(first + chunk, count)):
            payload = _payload(rng, i) if payload_bytes is None else rng.randbytes(payload_bytes)
            plan = (i, payload, f"key-{i % 37}", {"i": str(i), "seed": str(seed), "ünï": "cödé"},
                    EVENT_TIME_BASE_MS + i, producer.producer_name())
            plans.append(plan)

            def done(result: pulsar.Result, mid: pulsar.MessageId, i: int = i) -> None:
                with lock:
                    if result == pulsar.Result.Ok:
                        ids[i] = mid
                    else:
                        failures.append((i, result))
            producer.send_async(plan[1], done, properties=plan[3], partition_key=plan[2],
                                event_timestamp=plan[4])
        producer.flush()
    wait_until(lambda: len(ids) + len(failures) == count, SEND_TIMEOUT_S, what=f"{count} send receipts")
    for producer in producers:
        producer.close()
    assert not failures, f"sends failed: {failures[:5]}"
    return [Sent(i, payload, key, props, event_ms, name, id_of(ids[i]), ids[i].serialize())
            for i, payload, key, props, event_ms, name in plans]


def in_id_order(sent: list[Sent]) -> list[Sent]:
    """The topic's order: by (ledger, entry, batch index)."""
    return sorted(sent, key=lambda s: s.msg_id)


def received_view(msg: pulsar.Message) -> tuple:
    return (id_of(msg.message_id()), msg.data(), msg.partition_key(), dict(msg.properties()),
            msg.event_timestamp())


def sent_view(s: Sent) -> tuple:
    return (s.msg_id, s.payload, s.key, s.properties, s.event_time_ms)


def assert_same_messages(got: list[tuple], expected: list[Sent], what: str) -> None:
    """`got` (received_view tuples) equals `expected` in order; names the first difference."""
    want = [sent_view(s) for s in expected]
    if got == want:
        return
    for n, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            raise AssertionError(f"{what}: message {n} differs: got {_short(a)}, expected {_short(b)}")
    raise AssertionError(f"{what}: got {len(got)} messages, expected {len(want)}")


def _short(view: tuple) -> str:
    mid, payload, *rest = view
    return f"id={mid} payload={payload[:40]!r}({len(payload)} B) rest={rest}"


def receive_views(consumer: pulsar.Consumer, count: int, timeout_ms: int = 30_000,
                  ack: bool = True) -> list[tuple]:
    """Exactly `count` messages' views, in arrival order (each receive bounded)."""
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_ms)
        if ack:
            consumer.acknowledge(msg)
        out.append(received_view(msg))
    return out


# --- bookies ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BookieSnapshot:
    """What the standalone's bookies hold, summed over them."""

    ledger_ids: frozenset[int]
    ledger_count: int
    disk_used_bytes: int


def bookie_addresses(data_dir: Path) -> list[str]:
    state = json.loads((Path(data_dir) / "standalone.json").read_text())
    return [f"127.0.0.1:{port}" for port in state["bookie_ports"]]


def bookie_snapshot(data_dir: Path) -> BookieSnapshot:
    """ListLedgers + GetInfo of every bookie of the standalone at `data_dir`."""
    from bookie.client import BookieClient
    from common.config import default_config

    async def ask() -> BookieSnapshot:
        ids: set[int] = set()
        count = used = 0
        for address in bookie_addresses(data_dir):
            bookie = BookieClient(address, config=default_config())
            try:
                ids.update(s.ledger_id for s in await bookie.list_ledgers())
                info = await bookie.info()
                count += info.ledger_count
                used += info.disk_used_bytes
            finally:
                await bookie.close()
        return BookieSnapshot(frozenset(ids), count, used)
    return asyncio.run(ask())


# --- S3 -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class S3Access:
    """Where and how to reach the offload bucket (path-style, SigV4, plain HTTP)."""

    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    prefix: str
    region: str = "us-east-1"

    @classmethod
    def of(cls, server: TestSeaweed, bucket: str, prefix: str) -> S3Access:
        """The session's SeaweedFS (`s3_server`), `bucket` created if it is not there yet."""
        server.new_bucket(bucket)
        return cls(server.endpoint, server.access_key, server.secret_key, bucket, prefix, server.region)

    def client(self) -> Any:
        import boto3
        from botocore.config import Config as BotoConfig
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region,
                            config=BotoConfig(s3={"addressing_style": "path"}, connect_timeout=5,
                                              read_timeout=30, retries={"max_attempts": 2}))

    def topic_prefix(self, topic: str) -> str:
        """The folder of a non-partitioned topic's objects, with a trailing slash."""
        return f"{self.prefix}/{topic_path(topic)}/"

    def ledger_key(self, topic: str, ledger_id: int) -> str:
        return f"{self.topic_prefix(topic)}ledger-{ledger_id:020d}.parquet"

    def list_objects(self, prefix: str) -> dict[str, int]:
        """key -> size of every complete object under `prefix`."""
        s3 = self.client()
        out: dict[str, int] = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        return out

    def pending_uploads(self, prefix: str) -> list[str]:
        """Keys of multipart uploads begun and neither completed nor aborted under `prefix`."""
        found = self.client().list_multipart_uploads(Bucket=self.bucket, Prefix=prefix)
        return [u["Key"] for u in found.get("Uploads", [])]

    def filesystem(self) -> Any:
        from pyarrow import fs
        scheme, _, host = self.endpoint.partition("://")
        return fs.S3FileSystem(endpoint_override=host, access_key=self.access_key,
                               secret_key=self.secret_key, region=self.region, scheme=scheme)

    def read_table(self, prefix: str) -> Any:
        """Every Parquet object under `prefix` as one pyarrow table (pyarrow.dataset)."""
        import pyarrow.dataset as ds
        return ds.dataset(f"{self.bucket}/{prefix.rstrip('/')}", format="parquet",
                          filesystem=self.filesystem()).to_table()

    def read_object(self, key: str) -> Any:
        """(table, file key-value metadata as str -> str) of one object."""
        import pyarrow.parquet as pq
        with self.filesystem().open_input_file(f"{self.bucket}/{key}") as f:
            parquet = pq.ParquetFile(f)
            table = parquet.read()
            meta = {k.decode(): v.decode() for k, v in (parquet.metadata.metadata or {}).items()}
        return table, meta
