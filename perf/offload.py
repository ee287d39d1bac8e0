"""`strata perf offload`: the cold tier's three figures, each measured in the same run.

    strata perf offload [--size 1G] [--json] [--rounds 2] [--receiver-queue 1000] [--profile DIR]

With no arguments it starts, on free loopback ports in a temp dir, a SeaweedFS (`weed mini`,
launch.seaweed.EmbeddedS3) and a `strata standalone` pointed at it by environment
(offload_driver=s3, the endpoint, the bucket, the credentials; a rollover of size/8, at least
1 MiB, so the topic spans several ledgers; a 500 ms retention pass), and removes both after.

1. Fill: a topic of 1 KiB messages, `--size` bytes of payload in all (units K/M/G, binary:
   1G = 1 GiB), each payload distinct random bytes (so neither Parquet's dictionary nor its
   compression can shrink what a real workload would not let it shrink), uncompressed batches of
   128 messages, with the native driver (perf/native.py's client, in a spawned process). Two
   more small topics (size/8, at most 16 MiB each) get LZ4 and ZSTD batches of distinct,
   compressible JSON-like payloads. The main topic's subscriptions (one per read, step 6) keep
   its backlog.
2. Restart the standalone: every ledger is closed (the open one is new and empty).
3. Offload (`offload_mb_per_s`): `PUT .../offload` with the open ledger's id, timed until
   `GET .../offload` says SUCCESS (polled every 100 ms); MB = the bookie bytes (internalStats
   `ledgers[].size`, decimal MB) of the ledgers it offloaded. The LZ4/ZSTD topics are offloaded
   too (not timed).
4. S3 bytes / bookie bytes (`s3_bytes_ratio`, `_lz4`, `_zstd`): the sizes of the objects under
   each topic's prefix (offload.keys.topic_prefix) over the offloaded ledgers' bookie bytes.
5. Raw upload (`raw_upload_mb_per_s`): plain boto3 multipart uploads to the same server, one
   object per offloaded ledger of the same size, the same part size (offload_s3_part_bytes) and
   the same parts in flight (offload_s3_parts_in_flight_max), one object after another as the
   offloader goes ledger by ledger; random bytes prepared before the clock starts. Run once just
   before the offload and once just after; the figure is the bytes over the mean of the two times.
6. Catch-up reads of the whole topic, alternating `--rounds` times (other work on a small
   machine moves single figures a lot), each after a restart so the broker's entry cache is
   empty, each on a subscription of its own created before the fill: from the bookies
   (offload_read_priority=bookkeeper-first, the bookie copies still there), then from S3
   (tiered-storage-first), the latter after one message of the LZ4 topic was read from S3
   (`first_cold_read_s`: the broker loads pyarrow with its first cold read, seconds on a busy
   box, once per process; a catch-up read of a broker that has run a while does not pay it).
   Then deletion lag 0 on the namespace, a wait until every offloaded
   ledger's bookie copy is gone (its ledger metadata is deleted only after the bookies deleted
   it), a restart, and one more read from S3. `consume_bookie_msgs_per_s` and
   `consume_s3_msgs_per_s` are the medians; every run is listed. The reader is the native
   protocol consumer (perf/native.py run_consumer: one process, Exclusive, individual acks), so
   the client is not the bottleneck.

Ratios and targets are reported beside the figures (issue 31: offload >= 0.9x raw upload,
S3 consume >= 0.9x bookie consume; issue 12: S3 bytes <= 1.3x bookie bytes). `--profile DIR` records the
standalone (broker and bookies) with py-spy during the offload and the last S3 read and reports
where the working threads' samples go (`top_functions`). Exit status 1 if a consumer missed a message or an offload
failed; the targets are reported, not enforced.

What must hold: every wait is bounded (`--timeout-s`); everything started here is stopped and
its temp dir removed, also on error or Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from admin_client import AdminClient
from common.config import Config, load_config
from common.errors import AdminHttpError, StrataError, TimeoutExpired
from perf.harness import (
    KIB,
    MB,
    WorkerPool,
    install_sigterm_cleanup,
    print_report,
    throughput,
    worker_main,
)
from perf.native_client import SUB_EXCLUSIVE

MIB = 1024 * KIB
GIB = 1024 * MIB
MESSAGE_BYTES = KIB
DEFAULT_SIZE = "1G"
ROLLOVER_BYTES_MIN = 1 * MIB
LEDGERS_PER_TOPIC = 8  # the main topic's rollover is size / this
COMPRESSED_TOPIC_BYTES_MAX = 16 * MIB
SUB_BOOKIE = "perf-offload-bookie"
SUB_S3 = "perf-offload-s3"
SUB_KEEP = "perf-offload-keep"
BUCKET = "strata-perf-offload"
RAW_PREFIX = "perf-raw-upload"
RAW_DISTINCT_PARTS = 8  # distinct random part bodies the raw upload cycles through
RETENTION_CHECK_MS = 500
ADMIN_TIMEOUT_S = 30.0
POLL_S = 0.1  # offload status polls: the timing is within this; faster polling costs the broker CPU
TARGETS = {"offload_vs_raw_upload": 0.9, "consume_s3_vs_bookie": 0.9, "s3_bytes_ratio_max": 1.3}
_UNITS = {"": 1, "B": 1, "K": KIB, "KB": KIB, "KIB": KIB, "M": MIB, "MB": MIB, "MIB": MIB,
          "G": GIB, "GB": GIB, "GIB": GIB}


def parse_size(text: str) -> int:
    """'64M' -> 67108864; units K/M/G (binary), optional B/iB; a bare number is bytes."""
    raw = text.strip().upper()
    digits = raw.rstrip("KMGIB")
    unit = raw[len(digits):]
    try:
        value = float(digits)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 64M, 1G)") from None
    if unit not in _UNITS or value <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 64M, 1G)")
    return int(value * _UNITS[unit])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf offload", description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size(DEFAULT_SIZE),
                        help="payload bytes of the main topic, K/M/G units (default 1G); 1 KiB messages")
    parser.add_argument("--receiver-queue", type=int, default=1000, help="consumer permits, in messages")
    parser.add_argument("--rounds", type=int, default=2,
                        help="alternating catch-up reads from the bookies and from S3 (medians reported)")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="bound on each phase")
    parser.add_argument("--idle-timeout-s", type=float, default=60.0,
                        help="a consumer gives up when nothing arrived for this long")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="py-spy the standalone during the offload and the S3 consume; raw stacks go to DIR")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------------
# Payloads and the fill (a spawned worker process per topic)

_WORDS = ("click", "view", "purchase", "login", "logout", "search", "cart", "checkout", "page",
          "home", "product", "category", "mobile", "desktop", "tablet", "chrome", "firefox",
          "safari", "europe", "america", "asia", "premium", "free", "trial", "error", "ok")


def text_payload(rng: random.Random, size: int) -> bytes:
    """A distinct JSON-like event of exactly `size` bytes, compressible about 2-4x like logs."""
    head = (f'{{"id":"{rng.getrandbits(64):016x}","user":{rng.randrange(10**6)},'
            f'"ts":{1_700_000_000_000 + rng.randrange(10**9)},"event":"{rng.choice(_WORDS)}","tags":[')
    words = []
    length = len(head)
    while length < size:
        word = f'"{rng.choice(_WORDS)}-{rng.randrange(1000)}",'
        words.append(word)
        length += len(word)
    return (head + "".join(words)).encode()[:size]


def random_payloads(count: int, size: int) -> list[bytes]:
    """`count` distinct random payloads (one urandom call, sliced)."""
    block = os.urandom(count * size)
    return [block[i * size:(i + 1) * size] for i in range(count)]


def run_fill(kw: dict, signal_ready, wait_start) -> dict:
    """Worker body: publish kw["messages"] payloads of kw["size"] bytes in full batches."""
    import uvloop
    return uvloop.run(_fill(kw, signal_ready, wait_start))


async def _fill(kw: dict, signal_ready, wait_start) -> dict:
    from perf.native import COMPRESSIONS
    from perf.native_client import NativeClient, batch_sizes
    client = NativeClient(kw["service_url"])
    rng = random.Random(kw["seed"])
    per_batch = batch_sizes(kw["size"])
    try:
        [producer] = await client.create_producers(kw["topic"], max_pending_messages=kw["max_pending"])
        encoder = producer.encoder(b"", COMPRESSIONS[kw["compression"]])
        signal_ready()
        await asyncio.get_running_loop().run_in_executor(None, wait_start)
        start_s = time.time()
        sent = batches = 0
        while sent < kw["messages"]:
            count = min(per_batch, kw["messages"] - sent)
            payloads = (random_payloads(count, kw["size"]) if kw["payload"] == "random"
                        else [text_payload(rng, kw["size"]) for _ in range(count)])
            await producer.send_payloads(encoder, payloads)
            sent += count
            batches += 1
        await producer.flush()
        end_s = time.time()
        await producer.close()
    finally:
        await client.close()
    return {"messages": sent, "bytes": sent * kw["size"], "batches": batches,
            "start_s": start_s, "end_s": end_s}


# ------------------------------------------------------------------------------------------------
# The admin REST API


def _admin(admin_url: str, method: str, path: str, body: Any = None) -> Any:
    """One admin call (admin_client); the parsed JSON answer (None when empty). A 4xx/5xx raises
    StrataError naming the call and the broker's answer; an unreachable broker AdminUnreachable."""
    try:
        return AdminClient(admin_url, timeout_s=ADMIN_TIMEOUT_S).call(method, path, body)
    except AdminHttpError as exc:
        raise StrataError("admin call failed", method=method, path=path, status=exc.status,
                          reason=exc.body.decode(errors="replace")[:500]) from None


def _topic_path(topic: str) -> str:
    """persistent://t/ns/local -> /admin/v2/persistent/t/ns/local"""
    return "/admin/v2/persistent/" + topic.split("://", 1)[1]


def internal_stats(admin_url: str, topic: str) -> dict:
    return _admin(admin_url, "GET", _topic_path(topic) + "/internalStats")


def ml_name(topic: str) -> str:
    """persistent://t/ns/local -> t/ns/persistent/local (the managed ledger's name)."""
    tenant, namespace, local = topic.split("://", 1)[1].split("/", 2)
    return f"{tenant}/{namespace}/persistent/{local}"


@dataclass
class OffloadResult:
    seconds: float
    ledgers: dict[int, int]    # offloaded ledger id -> bookie bytes
    entries: int               # entries in those ledgers
    total_entries: int         # entries in the topic's ledgers


def offload(admin_url: str, topic: str, timeout_s: float) -> OffloadResult:
    """Offload every closed ledger (before the open one); bounded wait for SUCCESS."""
    before = internal_stats(admin_url, topic)["ledgers"]
    if not before:
        raise StrataError("the topic has no ledgers", topic=topic)
    open_ledger = max(ledger["ledgerId"] for ledger in before)
    path = _topic_path(topic) + "/offload"
    start = time.perf_counter()
    _admin(admin_url, "PUT", path, {"ledgerId": open_ledger, "entryId": 0, "partitionIndex": -1})
    deadline = start + timeout_s
    while True:
        status = _admin(admin_url, "GET", path)
        if status["status"] == "SUCCESS":
            break
        if status["status"] == "ERROR":
            raise StrataError("offload failed", topic=topic, last_error=status.get("lastError"))
        if time.perf_counter() > deadline:
            raise TimeoutExpired("offload did not finish", topic=topic, timeout_s=timeout_s, status=status)
        time.sleep(POLL_S)
    seconds = time.perf_counter() - start
    was_offloaded = {ledger["ledgerId"] for ledger in before if ledger.get("offloaded")}
    stats = internal_stats(admin_url, topic)  # the open ledger is listed with 0 entries (as Pulsar)
    after = stats["ledgers"]
    done = [ledger for ledger in after if ledger.get("offloaded") and ledger["ledgerId"] not in was_offloaded]
    total_entries = sum(ledger["entries"] for ledger in after) + stats.get("currentLedgerEntries", 0)
    return OffloadResult(seconds, {ledger["ledgerId"]: ledger["size"] for ledger in done},
                         sum(ledger["entries"] for ledger in done), total_entries)


_STAGE_WAIT = re.compile(r"(\w+) ([0-9.]+) s")


def offload_stage_waits(log_text: str, ml: str) -> dict[str, float] | None:
    """Seconds the offloader's ledger uploads of managed ledger `ml` waited on each stage
    (bookie reads, encoding, free upload slots), summed from the broker's "offloaded ledger"
    log lines (offload/uploader.py); None when the log has none."""
    waits: dict[str, float] = {}
    for line in log_text.splitlines():
        if "offloaded ledger" not in line or f" of {ml}:" not in line or "waited on " not in line:
            continue
        for stage, seconds in _STAGE_WAIT.findall(line.rsplit("waited on ", 1)[1]):
            waits[stage] = round(waits.get(stage, 0.0) + float(seconds), 3)
    return waits or None


# ------------------------------------------------------------------------------------------------
# S3: the prefix sizes, the raw upload


def prefix_bytes(client: Any, bucket: str, prefix: str) -> tuple[int, int]:
    """(objects, bytes) under `prefix`."""
    objects = total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            objects += 1
            total += item["Size"]
    return objects, total


def raw_upload(client: Any, bucket: str, object_bytes: list[int], part_bytes: int, in_flight: int) -> float:
    """Seconds for plain boto3 multipart uploads of objects of these sizes, one after another,
    each with `in_flight` parts of `part_bytes` uploading at once. Objects are deleted after."""
    parts = [os.urandom(part_bytes) for _ in range(RAW_DISTINCT_PARTS)]
    keys: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(in_flight) as pool:
        start = time.perf_counter()
        for size in object_bytes:
            key = f"{RAW_PREFIX}/{uuid.uuid4().hex}"
            keys.append(key)
            upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            sizes = [min(part_bytes, size - offset) for offset in range(0, size, part_bytes)]

            def put(number: int, length: int, key: str = key, upload_id: str = upload_id) -> dict:
                body = parts[number % RAW_DISTINCT_PARTS][:length]
                etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                          PartNumber=number, Body=body)["ETag"]
                return {"PartNumber": number, "ETag": etag}

            done = list(pool.map(put, range(1, len(sizes) + 1), sizes))
            client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                             MultipartUpload={"Parts": done})
        seconds = time.perf_counter() - start
    for key in keys:
        client.delete_object(Bucket=bucket, Key=key)
    return seconds


def bookie_ledgers_left(data_dir: Path, ledger_ids: list[int]) -> list[int]:
    """The ledgers that still have ledger metadata in the standalone's store (the ledger client
    deletes it only after every bookie deleted its copy)."""
    from ledger.ledger_metadata import ledger_path
    from metadata import open_store
    db = data_dir / "metadata.db"
    if not db.is_file():  # open_store would create an empty store and find nothing
        raise StrataError("the standalone's metadata store is not where expected", path=str(db))
    store = open_store(f"sqlite:///{db}")
    try:
        return [lid for lid in ledger_ids if store.get(ledger_path(lid)) is not None]
    finally:
        store.close()


def drop_bookie_copies(admin_url: str, data_dir: Path, ledger_ids: list[int], timeout_s: float) -> float:
    """Set the namespace's offloadDeletionLagMs to 0 and wait until the bookie copies of
    `ledger_ids` (all present before) are deleted; returns the seconds waited."""
    if bookie_ledgers_left(data_dir, ledger_ids) != ledger_ids:
        raise StrataError("offloaded ledgers lost their bookie copy before the lag was set", ledgers=ledger_ids)
    _admin(admin_url, "PUT", "/admin/v2/namespaces/public/default/offloadDeletionLagMs", 0)
    start = time.monotonic()
    while left := bookie_ledgers_left(data_dir, ledger_ids):
        if time.monotonic() - start > timeout_s:
            raise TimeoutExpired("bookie copies of offloaded ledgers not deleted", left=left[:10],
                                 timeout_s=timeout_s)
        time.sleep(0.1)
    return time.monotonic() - start


# ------------------------------------------------------------------------------------------------
# What runs: SeaweedFS, the standalone, profiling


@dataclass
class Stack:
    s3: Any          # launch.seaweed.EmbeddedS3
    standalone: Any  # launch.standalone.StandaloneProcess
    config: Config   # the settings the standalone runs with (same environment)
    offloaded: list[int] = field(default_factory=list)  # ledger ids of the main topic offloaded


def standalone_env(s3: Any, size_bytes: int) -> dict[str, str]:
    """Settings for the standalone under test: the cold tier on `s3`, several ledgers per topic."""
    return {
        **s3.credentials.env(),
        "STRATA_OFFLOAD_DRIVER": "s3",
        "STRATA_OFFLOAD_S3_ENDPOINT": s3.endpoint,
        "STRATA_OFFLOAD_S3_BUCKET": s3.bucket,
        "STRATA_OFFLOAD_S3_REGION": s3.region,
        "STRATA_MANAGED_LEDGER_ROLLOVER_BYTES": str(max(ROLLOVER_BYTES_MIN, size_bytes // LEDGERS_PER_TOPIC)),
        "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
        "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": str(RETENTION_CHECK_MS),
    }


@contextlib.contextmanager
def stack(size_bytes: int) -> Iterator[Stack]:
    """A SeaweedFS and a standalone using it, in one temp dir removed on the way out."""
    from launch.seaweed import EmbeddedS3, S3Credentials
    from launch.standalone import StandaloneProcess
    root = Path(tempfile.mkdtemp(prefix="strata-perf-offload-"))
    s3 = EmbeddedS3(root / "s3", S3Credentials.generate(), bucket=BUCKET, log_path=root / "weed.log")
    sa = None
    try:
        s3.start()
        env = standalone_env(s3, size_bytes)
        config = load_config(env={k: v for k, v in env.items() if k.startswith("STRATA_")})
        sa = StandaloneProcess.start(root / "data", env=env)
        try:
            yield Stack(s3, sa, config)
        except StrataError:  # the log goes with the temp dir: show its end while it is there
            print(f"--- end of the standalone's log ---\n{sa.log_tail()}", file=sys.stderr)
            raise
    finally:
        if sa is not None:
            sa.close()
        s3.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def profiled(pid: int, out_dir: str | None, name: str) -> Iterator[dict]:
    """py-spy record of `pid` and its children while the block runs; the top functions by own
    samples go into the yielded dict (key "top") after the block. No-op when out_dir is None."""
    found: dict = {}
    if out_dir is None:
        yield found
        return
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    raw = Path(out_dir) / f"{name}.txt"
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    proc = subprocess.Popen([spy, "record", "--pid", str(pid), "--subprocesses", "--rate", "250",
                             "--format", "raw", "--output", str(raw), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.0)  # py-spy attaches
    try:
        yield found
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    found["top"] = top_functions(raw) if raw.exists() else "py-spy wrote nothing"
    found["stacks"] = str(raw)


_LINE_NUMBER = re.compile(r":\d+\)$")
# leaf frames of a thread that waits (py-spy's idle detection misses some under load)
_WAITING = ("Condition.wait (", "Event.wait (", "_worker (concurrent/futures/thread.py)", "Thread.join (",
            "Queue.get (", "select (", "SocketIO.readinto (", "Runner.run (asyncio/runners.py)")
_COMPONENTS = ("offload/", "ledger/", "broker/", "bookie/", "entries/", "cursor/")
_PLUMBING = ("metadata/", "common/")


def _strata_caller(frames: list[str]) -> str | None:
    """The innermost frame in a Strata component (else in its plumbing): who the sample is for."""
    for prefixes in (_COMPONENTS, _PLUMBING):
        for frame in reversed(frames):
            if frame.split("(")[-1].startswith(prefixes):
                return frame
    return None


def top_functions(raw: Path, count: int = 5) -> dict:
    """From py-spy's raw (collapsed) stacks: where the samples of working threads go.

    waiting_share: samples whose leaf is a wait (a lock, a queue, a socket read, the event loop's
    poll in C); own: the functions with the most own samples among the rest; strata: the same
    samples charged to the innermost Strata function on the stack (offload/, ledger/, broker/,
    bookie/, entries/, cursor/ first, else metadata/ or common/). Shares are of all samples."""
    own: dict[str, int] = {}
    strata: dict[str, int] = {}
    total = waiting = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack_text, _, n_text = line.rpartition(" ")
        if not stack_text or not n_text.isdigit():
            continue
        n = int(n_text)
        frames = [_LINE_NUMBER.sub(")", f) for f in stack_text.split(";")[1:]]  # [0] names the process
        total += n
        if not frames or frames[-1].startswith(_WAITING):
            waiting += n
            continue
        own[frames[-1]] = own.get(frames[-1], 0) + n
        caller = _strata_caller(frames) or "(no Strata frame)"
        strata[caller] = strata.get(caller, 0) + n

    def best(counts: dict[str, int]) -> list[str]:
        return [f"{100.0 * n / max(total, 1):.1f}% {name}"
                for name, n in sorted(counts.items(), key=lambda kv: -kv[1])[:count]]
    return {"samples": total, "waiting_share": round(waiting / max(total, 1), 3),
            "own": best(own), "strata": best(strata)}


# ------------------------------------------------------------------------------------------------
# Phases


def _topic(kind: str) -> str:
    return f"persistent://public/default/perf-offload-{kind}-{uuid.uuid4().hex[:8]}"


async def _create_subscriptions(service_url: str, topic: str, subscriptions: list[str]) -> None:
    from perf.native_client import EARLIEST, NativeClient
    client = NativeClient(service_url)
    try:
        for name in subscriptions:
            for consumer in await client.subscribe(topic, name, initial_position=EARLIEST, send_flow=False):
                await consumer.close()
    finally:
        await client.close()


def fill(service_url: str, topics: dict[str, tuple[int, str, str]], timeout_s: float, ctx) -> dict:
    """Publish to every topic at once, one process each: topic -> (messages, compression, payload kind)."""
    kwargs = [{"service_url": service_url, "topic": topic, "messages": messages, "size": MESSAGE_BYTES,
               "compression": compression, "payload": payload, "max_pending": 10_000, "seed": i}
              for i, (topic, (messages, compression, payload)) in enumerate(topics.items())]
    pool = WorkerPool(functools.partial(worker_main, run_fill), kwargs, ctx)
    try:
        pool.launch()
        pool.go()
        results = pool.collect(timeout_s)
    finally:
        pool.terminate()
    messages, _, seconds = throughput(results[:1], "messages")
    return {"fill_msgs_per_s": round(messages / seconds, 1), "fill_seconds": round(seconds, 3)}


def consume(service_url: str, topic: str, subscription: str, messages: int, args: argparse.Namespace,
            ctx) -> dict:
    """Catch-up read of the backlog with the native consumer (one process, Exclusive)."""
    import perf.native as native
    kw = {"service_url": service_url, "topic": topic, "subscription": subscription,
          "sub_type": SUB_EXCLUSIVE, "shared": False, "expected": messages,
          "shared_count": ctx.Value("q", 0), "size": MESSAGE_BYTES, "receiver_queue": args.receiver_queue,
          "ack": "individual", "verify": False, "idle_timeout_s": args.idle_timeout_s}
    pool = WorkerPool(functools.partial(worker_main, native.run_consumer), [kw], ctx)
    try:
        pool.launch()
        pool.go()
        [result] = pool.collect(args.timeout_s)
    finally:
        pool.terminate()
    received, total_bytes, seconds = throughput([result], "received")
    return {"msgs_per_s": round(received / seconds, 1), "mb_per_s": round(total_bytes / seconds / MB, 2),
            "received": received, "seconds": round(seconds, 3)}


def s3_ratio(st: Stack, topic: str, result: OffloadResult) -> dict:
    """The objects under the topic's prefix against the bookie bytes of its offloaded ledgers."""
    from offload.keys import topic_prefix
    objects, s3_bytes = prefix_bytes(st.s3.client(), st.s3.bucket,
                                     topic_prefix(st.config.offload_s3_prefix, ml_name(topic)))
    bookie_bytes = sum(result.ledgers.values())
    if objects != len(result.ledgers):
        raise StrataError("objects under the topic's prefix are not one per offloaded ledger",
                          topic=topic, objects=objects, ledgers=len(result.ledgers))
    return {"objects": objects, "s3_bytes": s3_bytes, "bookie_bytes": bookie_bytes,
            "ratio": round(s3_bytes / bookie_bytes, 3) if bookie_bytes else None}


def restart(sa: Any, read_priority: str) -> None:
    """Restart the standalone (its entry cache empty) reading offloaded ledgers `read_priority`."""
    sa.env["STRATA_OFFLOAD_READ_PRIORITY"] = read_priority
    sa.restart()


def first_cold_read(admin_url: str, topic: str) -> float:
    """Seconds for the restarted broker's first read from S3: the earliest message of `topic` (an
    offloaded topic other than the measured one, so none of the measured topic's footers or row
    groups get cached). The broker loads pyarrow with its first cold read; this pays for that
    once per process, as a long-running broker does, outside the catch-up figure."""
    started_s = time.perf_counter()
    AdminClient(admin_url, timeout_s=ADMIN_TIMEOUT_S).call_raw(
        "GET", _topic_path(topic) + "/examinemessage", query={"initialPosition": "earliest", "messagePosition": "1"})
    return time.perf_counter() - started_s


def consume_rounds(st: Stack, args: argparse.Namespace, topic: str, messages: int, ctx, warm_topic: str) -> dict:
    """Alternating catch-up reads of the offloaded topic, each after a restart: from the bookies
    (bookkeeper-first, the copies still there), then from S3 (tiered-storage-first, after one
    read of `warm_topic` from S3: `first_cold_read`), `--rounds` times; then lag 0, the bookie
    copies deleted, and one more read from S3."""
    sa = st.standalone
    out: dict[str, Any] = {"bookie": [], "s3": [], "first_cold_read_s": []}
    for r in range(args.rounds):
        restart(sa, "bookkeeper-first")
        out["bookie"].append(consume(sa.service_url, topic, f"{SUB_BOOKIE}-{r}", messages, args, ctx))
        restart(sa, "tiered-storage-first")
        out["first_cold_read_s"].append(first_cold_read(sa.admin_url, warm_topic))
        out["s3"].append(consume(sa.service_url, topic, f"{SUB_S3}-{r}", messages, args, ctx))
    out["bookie_delete_wait_s"] = drop_bookie_copies(sa.admin_url, sa.data_dir, sorted(st.offloaded), args.timeout_s)
    restart(sa, "tiered-storage-first")
    out["first_cold_read_s"].append(first_cold_read(sa.admin_url, warm_topic))
    with profiled(sa.pid, args.profile, "consume_s3") as out["consume_profile"]:
        out["s3_bookie_gone"] = consume(sa.service_url, topic, f"{SUB_S3}-gone", messages, args, ctx)
    return out


def measure(st: Stack, args: argparse.Namespace, ctx) -> dict:
    """The steps of the module docstring on a running stack; the raw figures."""
    sa = st.standalone
    main, lz4, zstd = _topic("main"), _topic("lz4"), _topic("zstd")
    messages = max(1, args.size // MESSAGE_BYTES)
    small = max(1, min(args.size // LEDGERS_PER_TOPIC, COMPRESSED_TOPIC_BYTES_MAX) // MESSAGE_BYTES)
    subscriptions = [f"{kind}-{r}" for r in range(args.rounds) for kind in (SUB_BOOKIE, SUB_S3)]
    asyncio.run(_create_subscriptions(sa.service_url, main, subscriptions + [f"{SUB_S3}-gone"]))
    for topic in (lz4, zstd):
        asyncio.run(_create_subscriptions(sa.service_url, topic, [SUB_KEEP]))
    out: dict[str, Any] = {"fill": fill(sa.service_url, {main: (messages, "none", "random"),
                                                         lz4: (small, "lz4", "text"),
                                                         zstd: (small, "zstd", "text")}, args.timeout_s, ctx)}
    sa.restart()  # every ledger closed (the new open one is empty)
    ledger_bytes = [ledger["size"] for ledger in internal_stats(sa.admin_url, main)["ledgers"] if ledger["size"]]
    raw = functools.partial(raw_upload, st.s3.client(), st.s3.bucket, ledger_bytes, st.config.offload_s3_part_bytes,
                            st.config.offload_s3_parts_in_flight_max)
    out["raw_seconds"] = [raw()]  # once before the offload and once after: the machine's load moves
    with profiled(sa.pid, args.profile, "offload") as out["offload_profile"]:
        out["offload"] = offload(sa.admin_url, main, args.timeout_s)
    out["raw_seconds"].append(raw())
    out["stage_waits"] = offload_stage_waits(sa.log_path.read_text(errors="replace"), ml_name(main))
    st.offloaded = list(out["offload"].ledgers)
    out["ratio"] = {"none": s3_ratio(st, main, out["offload"])}
    for name, topic in (("lz4", lz4), ("zstd", zstd)):
        out["ratio"][name] = s3_ratio(st, topic, offload(sa.admin_url, topic, args.timeout_s))
    if sorted(ledger_bytes) != sorted(out["offload"].ledgers.values()):
        raise StrataError("the raw upload's objects are not the offloaded ledgers' sizes", raw=ledger_bytes,
                          offloaded=sorted(out["offload"].ledgers.values()))
    out.update(consume_rounds(st, args, main, messages, ctx, warm_topic=lz4))
    out["messages"] = messages
    out["small_messages"] = small
    return out


def _median_rate(runs: list[dict]) -> float:
    return float(statistics.median(run["msgs_per_s"] for run in runs))


def _rate(numerator: float, seconds: float, digits: int = 1) -> float | None:
    return round(numerator / seconds, digits) if seconds > 0 else None


def _share(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def report(args: argparse.Namespace, st: Stack, m: dict) -> dict:
    off: OffloadResult = m["offload"]
    bookie_bytes = sum(off.ledgers.values())
    offload_mb_s = _rate(bookie_bytes / MB, off.seconds, 2)
    raw_runs = [_rate(bookie_bytes / MB, seconds, 2) for seconds in m["raw_seconds"]]
    raw_mb_s = _rate(bookie_bytes / MB, statistics.mean(m["raw_seconds"]), 2)  # the bytes over the mean time
    ratios = {name: r["ratio"] for name, r in m["ratio"].items()}
    s3_runs = m["s3"] + [m["s3_bookie_gone"]]
    s3_rate, bookie_rate = _median_rate(s3_runs), _median_rate(m["bookie"])
    result: dict[str, Any] = {
        "offload_mb_per_s": offload_mb_s,
        "raw_upload_mb_per_s": raw_mb_s,
        "consume_s3_msgs_per_s": s3_rate,
        "consume_bookie_msgs_per_s": bookie_rate,
        "s3_bytes_ratio": ratios["none"],
        "s3_bytes_ratio_lz4": ratios["lz4"],
        "s3_bytes_ratio_zstd": ratios["zstd"],
        "offload_vs_raw_upload": _share(offload_mb_s, raw_mb_s),
        "consume_s3_vs_bookie": _share(s3_rate, bookie_rate),
        "targets": TARGETS,
    }
    result["targets_met"] = {
        "offload_vs_raw_upload": (result["offload_vs_raw_upload"] or 0) >= TARGETS["offload_vs_raw_upload"],
        "consume_s3_vs_bookie": (result["consume_s3_vs_bookie"] or 0) >= TARGETS["consume_s3_vs_bookie"],
        "s3_bytes_ratio": ratios["none"] is not None and ratios["none"] <= TARGETS["s3_bytes_ratio_max"],
    }
    result.update({
        "size_bytes": args.size, "message_bytes": MESSAGE_BYTES, "messages": m["messages"],
        "ledgers_offloaded": len(off.ledgers), "offloaded_bookie_bytes": bookie_bytes,
        "offloaded_entries_fraction": _share(off.entries, off.total_entries),
        "s3_bytes": m["ratio"]["none"]["s3_bytes"], "offload_seconds": round(off.seconds, 3),
        "raw_upload_seconds": [round(seconds, 3) for seconds in m["raw_seconds"]],
        "raw_upload_runs_mb_per_s": raw_runs,
        "offload_stage_wait_s": m["stage_waits"],
        "part_bytes": st.config.offload_s3_part_bytes, "parts_in_flight": st.config.offload_s3_parts_in_flight_max,
        "row_group_bytes": st.config.offload_row_group_bytes,
        "consume_s3_runs_msgs_per_s": [run["msgs_per_s"] for run in s3_runs],
        "consume_bookie_runs_msgs_per_s": [run["msgs_per_s"] for run in m["bookie"]],
        "consume_s3_bookie_gone_msgs_per_s": m["s3_bookie_gone"]["msgs_per_s"],
        "first_cold_read_s": [round(seconds, 3) for seconds in m["first_cold_read_s"]],
        "consumer": "native protocol consumer (perf/native.py run_consumer), 1 process, Exclusive",
        "all_accounted": all(run["received"] == m["messages"] for run in s3_runs + m["bookie"]),
        "bookie_delete_wait_s": round(m["bookie_delete_wait_s"], 3),
        "payloads": "main: distinct random 1 KiB, uncompressed batches; lz4/zstd: distinct JSON-like text",
        "lz4_zstd_messages": m["small_messages"],
        "lz4": m["ratio"]["lz4"], "zstd": m["ratio"]["zstd"], **m["fill"],
    })
    if args.profile:
        result["profile_offload_top"] = m["offload_profile"].get("top")
        result["profile_consume_s3_top"] = m["consume_profile"].get("top")
    return result


def run(args: argparse.Namespace) -> dict:
    ctx = multiprocessing.get_context("spawn")
    load_before = os.getloadavg()[0]
    with stack(args.size) as st:
        measured = measure(st, args, ctx)
        result = report(args, st, measured)
    # other work on the machine skews every figure: say how busy it was
    result["load_avg_1m"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    result["cpus"] = os.cpu_count()
    return result


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    install_sigterm_cleanup()
    if args.receiver_queue < 1 or args.rounds < 1 or args.timeout_s <= 0:
        print("strata perf offload: --receiver-queue and --rounds must be >= 1, --timeout-s > 0", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"strata perf offload: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context managers stopped everything
        print("strata perf offload: interrupted", file=sys.stderr)
        return 130
    print_report("strata perf offload", result, args.json)
    return 0 if result["all_accounted"] else 1
