"""`strata perf compaction`: how fast a topic compacts, and a compacted reader against a plain one.

    strata perf compaction [--messages 1000000] [--keys N] [--size 1024] [--json] [--timeout-s 3600]

With no arguments it starts a `strata standalone` (no S3) on free loopback ports in a temp dir,
and removes it after.

1. Fill: `--messages` messages of `--size` bytes (default 1M x 1 KiB), keys `k0..k{keys-1}`
   in turn (default keys = messages / 2, so every key is written twice and the compacted view
   holds half the messages), distinct payload bytes (slices of a random buffer), sent with the
   official client batching (its defaults: up to 1,000 messages / 128 KiB per batch).
2. Compact (`compaction_mb_per_s`): `PUT .../compaction`, timed until `GET .../compaction`
   says SUCCESS (polled every 100 ms); MB = the topic's stored bytes before the run
   (internalStats `ledgers[].size` plus `currentLedgerSize`, decimal MB).
3. Read the whole topic with the official client's reader from earliest, once with
   `is_read_compacted=True` (`compacted_read_msgs_per_s`: it gets one message per key) and once
   plain (`plain_read_msgs_per_s`: every message), each timed from the reader's creation to its
   last message. Both counts are checked (exit status 1 if one is off).

What must hold: every wait is bounded (`--timeout-s`); the standalone is stopped and its temp dir
removed, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from admin_client import AdminClient

PAYLOAD_POOL_BYTES = 4 * 1024 * 1024
TOPIC = "persistent://public/default/perf-compaction"
ADMIN_TIMEOUT_S = 30.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="strata perf compaction", description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=1_000_000, help="messages to write (default 1M)")
    p.add_argument("--keys", type=int, default=0, help="distinct keys (default messages / 2)")
    p.add_argument("--size", type=int, default=1024, help="payload bytes per message (default 1024)")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="bound on each stage")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.messages < 1 or args.size < 1:
        p.error("--messages and --size must be positive")
    args.keys = args.keys or max(1, args.messages // 2)
    return args


def _admin(admin_url: str, method: str, path: str) -> Any:
    """One admin call (admin_client: redirects followed, typed errors); the JSON answer or None."""
    return AdminClient(admin_url, timeout_s=ADMIN_TIMEOUT_S).call(method, path)


def _path(what: str) -> str:
    return "/admin/v2/persistent/" + TOPIC.split("://", 1)[1] + "/" + what


def fill(client: Any, args: argparse.Namespace) -> float:
    """Write the topic; returns the seconds it took."""
    pool = os.urandom(PAYLOAD_POOL_BYTES + args.size)
    producer = client.create_producer(TOPIC, batching_enabled=True, block_if_queue_full=True,
                                      max_pending_messages=10_000, batching_max_publish_delay_ms=5)
    started = time.monotonic()
    step = 4099     # a prime stride through the pool: neighbours differ
    for i in range(args.messages):
        offset = (i * step) % PAYLOAD_POOL_BYTES
        producer.send_async(pool[offset:offset + args.size], None, partition_key=f"k{i % args.keys}")
    producer.flush()
    producer.close()
    return time.monotonic() - started


def stored_bytes(admin_url: str) -> int:
    stats = _admin(admin_url, "GET", _path("internalStats"))
    ledgers = stats["ledgers"]
    return sum(int(ledger["size"]) for ledger in ledgers[:-1]) + int(stats["currentLedgerSize"])


def compact(admin_url: str, timeout_s: float) -> tuple[float, dict]:
    started = time.monotonic()
    _admin(admin_url, "PUT", _path("compaction"))
    while True:
        status = _admin(admin_url, "GET", _path("compaction"))
        if status["status"] in ("SUCCESS", "ERROR"):
            return time.monotonic() - started, status
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"compaction still running after {timeout_s:.0f} s")
        time.sleep(0.1)


def read(client: Any, compacted: bool, expected: int, timeout_s: float) -> tuple[int, float]:
    """(messages read, seconds) of a reader from earliest to the end."""
    import pulsar
    started = time.monotonic()
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest, is_read_compacted=compacted,
                                  receiver_queue_size=10_000)
    count = 0
    try:
        while count < expected and time.monotonic() - started < timeout_s:
            try:
                reader.read_next(10_000)
            except pulsar.Timeout:
                break
            count += 1
        took_s = time.monotonic() - started
    finally:
        reader.close()
    return count, took_s


def run(args: argparse.Namespace) -> dict:
    import pulsar

    from launch.standalone import StandaloneProcess
    sa = StandaloneProcess.start()
    try:
        client = pulsar.Client(sa.service_url, operation_timeout_seconds=60,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            fill_s = fill(client, args)
            topic_bytes = stored_bytes(sa.admin_url)
            compaction_s, status = compact(sa.admin_url, args.timeout_s)
            live = min(args.keys, args.messages)
            compacted_count, compacted_s = read(client, True, live, args.timeout_s)
            plain_count, plain_s = read(client, False, args.messages, args.timeout_s)
        finally:
            client.close()
    finally:
        sa.close()
    return {
        "messages": args.messages, "keys": args.keys, "message_bytes": args.size,
        "fill_s": round(fill_s, 2), "topic_mb": round(topic_bytes / 1e6, 1),
        "compaction_s": round(compaction_s, 2), "compaction_status": status["status"],
        "compaction_message": status.get("message") or status.get("lastError"),
        "compaction_mb_per_s": round(topic_bytes / 1e6 / compaction_s, 1),
        "compacted_read_messages": compacted_count, "compacted_read_s": round(compacted_s, 2),
        "compacted_read_msgs_per_s": round(compacted_count / compacted_s),
        "plain_read_messages": plain_count, "plain_read_s": round(plain_s, 2),
        "plain_read_msgs_per_s": round(plain_count / plain_s),
        "ok": status["status"] == "SUCCESS" and compacted_count == live and plain_count == args.messages,
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
