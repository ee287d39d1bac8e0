"""Shared pieces of the Kafka client tests: the records every client writes and reads back, their
comparison, topic names, Strata's admin REST (partitioned topics), and the two external tools
(kafkajs through node scripts in js/, kcat).

    recs = sample_records("gzip", 10)                     # keys, values, headers (one non-UTF-8, one null), times
    assert_same_records(recs, got)                        # key, value, headers, timestamp, in order
    node("consume.js", {...})                             # a kafkajs script: JSON in, JSON out, bounded
    kcat(["-C", "-t", t, ...])                            # kcat, bounded

What must hold: every wait and every subprocess has a bound; a missing tool (node, kafkajs, kcat)
fails the test with what to run (`make setup`), never skips it.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from admin_client.client import AdminClient

JS_DIR = Path(__file__).parent / "js"
NAMESPACE = "public/default"          # kafka_default_namespace
SUBPROCESS_TIMEOUT_S = 60.0
POLL_BOUND_S = 30.0                   # how long a consumer may take to read what is there

# a header value that is not UTF-8 (and has a NUL): must come back byte for byte
BINARY_HEADER = b"\xff\xfe\x00\x80bin"
COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]

_ids = itertools.count()


def unique_topic(prefix: str) -> str:
    """A Kafka topic name no other test of this run uses (Kafka's legal characters only)."""
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


def pulsar_topic(kafka_topic: str, partition: int | None = None) -> str:
    """Kafka topic `t` (partition i) = persistent://public/default/t(-partition-i)."""
    base = f"persistent://{NAMESPACE}/{kafka_topic}"
    return base if partition is None else f"{base}-partition-{partition}"


@dataclass(frozen=True)
class Rec:
    """A Kafka record as a test compares it (offset and partition are kept, not compared)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1
    partition: int = 0
    offset: int = field(default=-1, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"key": b64(self.key), "value": b64(self.value),
                "headers": [[k, b64(v)] for k, v in self.headers], "timestamp": self.timestamp,
                "partition": self.partition}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Rec:
        return cls(unb64(d["key"]), unb64(d["value"]), tuple((k, unb64(v)) for k, v in d["headers"]),
                   int(d["timestamp"]), int(d.get("partition", 0)), int(d.get("offset", -1)))


def b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def now_ms() -> int:
    return int(time.time() * 1000)


def sample_records(tag: str, count: int, *, base_ts: int | None = None, null_header: bool = True,
                   partition: int = 0, step_ms: int = 10) -> list[Rec]:
    """`count` records: keys (every 4th null), values with non-UTF-8 bytes, a text header, a binary
    (non-UTF-8) header and (null_header) a header with a null value; timestamps a minute in the past,
    `step_ms` apart, so the broker's own clock can not pass for them."""
    base = now_ms() - 60_000 if base_ts is None else base_ts
    out = []
    for i in range(count):
        headers: list[tuple[str, bytes | None]] = [("h-text", f"{tag}-{i}".encode()),
                                                   ("h-bin", BINARY_HEADER + bytes([i % 256]))]
        if null_header:
            headers.append(("h-null", None))
        key = None if i % 4 == 3 else f"key-{tag}-{i}".encode()
        value = f"value-{tag}-{i}-".encode() + bytes([0, 0xFF, i % 256]) + b"x" * (i * 7)
        out.append(Rec(key, value, tuple(headers), base + i * step_ms, partition))
    return out


def assert_same_records(sent: Sequence[Rec], got: Sequence[Rec], what: str = "") -> None:
    """The same records in the same order: key, value, headers (bytes exactly), timestamp, partition."""
    if list(sent) == list(got):
        return
    lines = [f"{what}: sent {len(sent)} records, read {len(got)}"]
    for i, (s, g) in enumerate(zip(sent, got)):
        if s != g:
            lines.append(f"first difference at #{i}:\n  sent {s}\n  read {g}")
            break
    if len(got) > len(sent):
        lines.append(f"extra: {list(got[len(sent):])[:3]}")
    elif len(got) < len(sent):
        lines.append(f"missing: {list(sent[len(got):])[:3]}")
    raise AssertionError("\n".join(lines))


def assert_offsets_increase(got: Sequence[Rec]) -> None:
    offsets = [r.offset for r in got]
    assert all(a < b for a, b in itertools.pairwise(offsets)), f"offsets not increasing: {offsets}"


# --- Strata's admin REST ---------------------------------------------------------------------

def create_partitioned(admin_url: str, kafka_topic: str, partitions: int) -> None:
    """A partitioned topic through Strata's admin REST (PUT .../partitions)."""
    AdminClient(admin_url).call("PUT", f"/admin/v2/persistent/{NAMESPACE}/{kafka_topic}/partitions", partitions)


def rest_partitions(admin_url: str, kafka_topic: str) -> int:
    """The partition count Strata's admin REST reports (0: not partitioned or absent)."""
    answer = AdminClient(admin_url).call("GET", f"/admin/v2/persistent/{NAMESPACE}/{kafka_topic}/partitions")
    return int(answer["partitions"])


# --- external tools ----------------------------------------------------------------------------

def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not installed: run `make setup` (scripts/install-debian-deps.sh installs it)")
    return path


def node(script: str, args: dict[str, Any], timeout_s: float = SUBPROCESS_TIMEOUT_S) -> Any:
    """Run js/<script> with one JSON argument under node; its last stdout line parsed as JSON."""
    node_bin = require_tool("node")
    if not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        pytest.fail(f"kafkajs is not installed in {JS_DIR}/node_modules: run `make setup`")
    try:
        proc = subprocess.run([node_bin, str(JS_DIR / script), json.dumps(args)], capture_output=True,
                              text=True, timeout=timeout_s, cwd=JS_DIR,
                              env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{script} did not finish within {timeout_s} s; stderr:\n{e.stderr}") from e
    if proc.returncode != 0:
        raise AssertionError(f"{script} {json.dumps(args)[:300]} exited {proc.returncode}:\n"
                             f"{proc.stderr[-4000:]}\nstdout: {proc.stdout[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing; stderr:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1])


def kcat(args: list[str | bytes], stdin: bytes | None = None,
         timeout_s: float = SUBPROCESS_TIMEOUT_S) -> bytes:
    """Run kcat (quiet, bounded); its stdout. A non-zero exit fails with its stderr."""
    kcat_bin = require_tool("kcat")
    try:
        proc = subprocess.run([kcat_bin, "-q", *args], input=stdin if stdin is not None else b"",
                              capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"kcat {args} did not finish within {timeout_s} s; stderr:\n{e.stderr!r}") from e
    if proc.returncode != 0:
        raise AssertionError(f"kcat {args} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')[-4000:]}")
    return proc.stdout
