"""Kafka's wire protocol by hand, for the raw-socket tests (test_idempotence_wire.py, test_bad_input_wire.py).

    with RawKafka("127.0.0.1", port) as conn:
        pid, epoch = conn.init_producer_id()
        batch = record_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        error, base_offset = conn.produce("orders", 0, batch)
        conn.send_frame(b"garbage")             # anything, framed (int32 size first)
        conn.recv_frame()                       # the next response frame, or None if the broker closed

Only classic (non-flexible) request versions, header v1 (KAFKA-FACTS §2): ApiVersions v0, InitProducerId
v1, Produce v7, ListOffsets v1, Metadata v1 or v4 (v4: AllowAutoTopicCreation), Fetch v7. Record
batches come from kafka-python's own builder (`DefaultRecordBatchBuilder`, magic 2, CRC-32C), so a test
can damage one on purpose (`with_bad_crc`).
Every socket operation is bounded (TIMEOUT_S).
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder

TIMEOUT_S = 15.0
CLIENT_ID = b"strata-raw-test"

API_PRODUCE, API_FETCH, API_LIST_OFFSETS, API_METADATA, API_API_VERSIONS, API_INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 22

# error codes (KAFKA-FACTS §3.2; apache/kafka Errors.java)
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47


class Reader:
    """Big-endian reads over a response body."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(">" + fmt, self.data, self.at)
        self.at += struct.calcsize(">" + fmt)
        return int(value)

    def string(self) -> str | None:
        n = self.take("h")
        if n < 0:
            return None
        s = self.data[self.at:self.at + n].decode()
        self.at += n
        return s

    def array_len(self) -> int:
        return self.take("i")


def string(s: str | bytes | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(raw)) + raw


def request_header(api_key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhi", api_key, version, correlation_id) + string(CLIENT_ID)


def record_batch(records: list[tuple[bytes | None, bytes | None]], *, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, timestamp_ms: int | None = None,
                 compression: int = 0) -> bytes:
    """One magic-2 batch of (key, value) records, as a producer sends it (BaseOffset 0)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=64 * 1024 * 1024)
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for i, (key, value) in enumerate(records):
        assert builder.append(i, timestamp=ts + i, key=key, value=value, headers=[]) is not None
    return bytes(builder.build())


def with_bad_crc(batch: bytes) -> bytes:
    """The same batch with its CRC (bytes 17..20, over attributes..end) flipped: CORRUPT_MESSAGE."""
    crc = struct.unpack_from(">I", batch, 17)[0]
    return batch[:17] + struct.pack(">I", crc ^ 0xFFFFFFFF) + batch[21:]


@dataclass
class FetchedPartition:
    top_error: int          # the response's own error (v7+)
    session_id: int
    error: int
    high_watermark: int
    log_start_offset: int
    records: bytes          # the record batches as sent


@dataclass
class PartitionProduced:
    error: int
    base_offset: int


class RawKafka:
    """One plain TCP connection to a Kafka listener; requests answered in order."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        self.sock.settimeout(TIMEOUT_S)
        self._ids = itertools.count(1)

    @classmethod
    def to(cls, bootstrap: str) -> RawKafka:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        return cls(host, int(port))

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # --- framing ---------------------------------------------------------------------------

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _recv_exact(self, n: int) -> bytes | None:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes | None:
        """The next response frame (correlation id first), or None when the broker closed the connection."""
        try:
            size = self._recv_exact(4)
        except ConnectionResetError:
            return None
        if size is None:
            return None
        (n,) = struct.unpack(">i", size)
        assert 0 <= n <= 256 * 1024 * 1024, f"response frame size {n}"
        return self._recv_exact(n)

    def closed_by_peer(self, timeout_s: float = TIMEOUT_S) -> bool:
        """True once the broker closes the connection (EOF or reset) within the bound."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(TIMEOUT_S)

    def call(self, api_key: int, version: int, body: bytes) -> Reader:
        """Send one request; return a reader positioned after the response header (v0: correlation id)."""
        cid = next(self._ids)
        self.send_frame(request_header(api_key, version, cid) + body)
        frame = self.recv_frame()
        assert frame is not None, f"the broker closed the connection instead of answering api {api_key} v{version}"
        reader = Reader(frame)
        got = reader.take("i")
        assert got == cid, f"correlation id {got}, expected {cid}"
        return reader

    # --- requests ----------------------------------------------------------------------------

    def api_versions(self, version: int = 0) -> tuple[int, dict[int, tuple[int, int]]]:
        """(error, {api key: (min, max)}), decoding the v0 body (what a broker answers an unknown version with)."""
        r = self.call(API_API_VERSIONS, version, b"")
        error = r.take("h")
        keys = {}
        for _ in range(r.array_len()):
            key, lo, hi = r.take("h"), r.take("h"), r.take("h")
            keys[key] = (lo, hi)
        return error, keys

    def init_producer_id(self) -> tuple[int, int]:
        """InitProducerId v1 for an idempotent (non-transactional) producer: (producer id, epoch)."""
        r = self.call(API_INIT_PRODUCER_ID, 1, string(None) + struct.pack(">i", 60_000))
        r.take("i")                                   # throttle
        error, pid, epoch = r.take("h"), r.take("q"), r.take("h")
        assert error == NONE, f"InitProducerId error {error}"
        assert pid >= 0 and epoch >= 0, (pid, epoch)
        return pid, epoch

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> PartitionProduced:
        """Produce v7 of one record set to one partition; the partition's (error, base offset)."""
        body = (string(None) + struct.pack(">hi", acks, 30_000) + struct.pack(">i", 1) + string(topic)
                + struct.pack(">i", 1) + struct.pack(">i", partition) + struct.pack(">i", len(records)) + records)
        r = self.call(API_PRODUCE, 7, body)
        assert r.array_len() == 1
        assert r.string() == topic
        assert r.array_len() == 1
        assert r.take("i") == partition
        error, base_offset = r.take("h"), r.take("q")
        return PartitionProduced(error, base_offset)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """ListOffsets v1 (-1 latest, -2 earliest, else by time): (error, offset)."""
        body = (struct.pack(">i", -1) + struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
                + struct.pack(">iq", partition, timestamp))
        r = self.call(API_LIST_OFFSETS, 1, body)
        assert r.array_len() == 1 and r.string() == topic and r.array_len() == 1
        assert r.take("i") == partition
        error = r.take("h")
        r.take("q")
        return error, r.take("q")

    def fetch(self, topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 1,
              max_bytes: int = 1024 * 1024, session_id: int = 0, session_epoch: int = -1) -> FetchedPartition:
        """Fetch v7 of one partition (read_uncommitted); session_epoch -1: no fetch session (full)."""
        body = (struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
                + struct.pack(">ii", session_id, session_epoch)
                + struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
                + struct.pack(">iqqi", partition, offset, -1, max_bytes)
                + struct.pack(">i", 0))                   # forgotten topics
        r = self.call(API_FETCH, 7, body)
        r.take("i")                                       # throttle
        top_error, got_session = r.take("h"), r.take("i")
        assert r.array_len() == 1 and r.string() == topic and r.array_len() == 1
        assert r.take("i") == partition
        error, high_watermark, _last_stable, log_start = r.take("h"), r.take("q"), r.take("q"), r.take("q")
        aborted = r.array_len()
        for _ in range(max(aborted, 0)):
            r.take("q"), r.take("q")
        n = r.take("i")
        records = b"" if n < 0 else r.data[r.at:r.at + n]
        return FetchedPartition(top_error, got_session, error, high_watermark, log_start, records)

    def metadata_topics(self, topics: list[str], allow_auto_create: bool | None = None) -> dict[str, tuple[int, int]]:
        """Metadata for `topics`: {name: (error, partition count)}. v1 (the broker's auto-creation
        setting decides), or v4 with AllowAutoTopicCreation when allow_auto_create is given."""
        body = struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
        version = 1
        if allow_auto_create is not None:
            body += struct.pack(">b", 1 if allow_auto_create else 0)
            version = 4
        r = self.call(API_METADATA, version, body)
        if version >= 3:
            r.take("i")                              # throttle
        for _ in range(r.array_len()):               # brokers: node id, host, port, rack
            r.take("i"), r.string(), r.take("i"), r.string()
        if version >= 2:
            r.string()                               # cluster id
        r.take("i")                                  # controller id
        out = {}
        for _ in range(r.array_len()):
            error, name = r.take("h"), r.string()
            r.take("b")                              # is internal
            count = r.array_len()
            for _ in range(count):
                r.take("h"), r.take("i"), r.take("i")
                for _ in range(r.array_len()):
                    r.take("i")
                for _ in range(r.array_len()):
                    r.take("i")
                if version >= 5:
                    for _ in range(r.array_len()):   # offline replicas
                        r.take("i")
            out[str(name)] = (error, count)
        return out
