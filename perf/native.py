"""The native driver's worker loops (`--driver native`): one producer or consumer process each.

Producer: one `NativeClient`, one producer per partition; batches of `batch_sizes(size)` messages
(the official client's limits: 1,000 messages / 128 KiB of payload) go round-robin over the
partitions, at most `max_pending` messages unacknowledged. At max rate it sends as fast as
receipts allow; with `rate` it sends, every `batch_delay_ms`, the messages that fell due since
the last tick (so a batch holds what the official client would gather in that delay). Publish
latency of a message = send -> receipt of its batch.

Consumer: subscribes on every partition, waits for the start signal, grants permits, counts the
members of every entry (num_messages_in_batch), acks whole entries (individual, grouped; or
cumulative), and records end-to-end latency (receive time - publish_time, same machine clock).
With `verify` it decodes every batch (broker/batch.py) and checks member count, payload size and
that each producer's sequence ids arrive without gap or repeat. Consumers of one run share a
counter and stop when it reaches `expected` or nothing arrived for `idle_timeout_s`.

Results are plain dicts (see `perf_common.throughput`): messages, bytes, start_s, end_s and
histograms as dicts.
"""

from __future__ import annotations

import asyncio
import os
import time

import uvloop

from entries.batch import LZ4, NONE, ZLIB, ZSTD
from perf.harness import LatencyHistogram
from perf.native_client import (
    EARLIEST,
    SUB_EXCLUSIVE,
    NativeClient,
    PlainBatchEncoder,
    ReceivedEntry,
    batch_sizes,
)

COMPRESSIONS = {"none": NONE, "lz4": LZ4, "zstd": ZSTD, "zlib": ZLIB}
RATE_TICK_S_MIN = 0.0005
RECEIVE_POLL_S = 0.2


# ------------------------------------------------------------------------------------------------
# Producer


def run_producer(kw: dict, signal_ready, wait_start) -> dict:
    return uvloop.run(_produce(kw, signal_ready, wait_start))


async def _produce(kw: dict, signal_ready, wait_start) -> dict:
    client = NativeClient(kw["service_url"], token=kw.get("token", ""), tls_trust_file=kw.get("tls_trust_file", ""))
    try:
        producers = await client.create_producers(kw["topic"], max_pending_messages=kw["max_pending"])
        hist = LatencyHistogram()
        payload = os.urandom(kw["size"])
        encoders = []
        for producer in producers:
            producer.on_receipt = hist.record
            encoders.append(PlainBatchEncoder(payload, producer.producer_name,
                                              COMPRESSIONS[kw["compression"]]))
        signal_ready()
        await asyncio.get_running_loop().run_in_executor(None, wait_start)
        start_s = time.time()
        if kw.get("rate"):
            batches = await _send_at_rate(producers, encoders, kw)
        else:
            batches = await _send_max(producers, encoders, kw["messages"], batch_sizes(kw["size"]))
        for producer in producers:
            await producer.flush()
        end_s = time.time()
        for producer in producers:
            await producer.close()
    finally:
        await client.close()
    return {"messages": kw["messages"], "bytes": kw["messages"] * kw["size"], "batches": batches,
            "start_s": start_s, "end_s": end_s, "latency": hist.to_dict()}


async def _send_max(producers, encoders, messages: int, per_batch: int) -> int:
    """Full batches, round-robin over partitions, as fast as max_pending allows."""
    sent = batches = 0
    n = len(producers)
    while sent < messages:
        count = min(per_batch, messages - sent)
        i = batches % n
        await producers[i].send_plain(encoders[i], count)
        sent += count
        batches += 1
    return batches


async def _send_at_rate(producers, encoders, kw: dict) -> int:
    """Every tick, send the messages due by now (rate per second), in batches of at most per_batch."""
    messages, rate = kw["messages"], float(kw["rate"])
    per_batch = batch_sizes(kw["size"])
    tick_s = max(RATE_TICK_S_MIN, kw["batch_delay_ms"] / 1000.0)
    n = len(producers)
    sent = batches = 0
    t0 = time.perf_counter()
    while sent < messages:
        due = min(messages, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            count = min(per_batch, due - sent)
            i = batches % n
            await producers[i].send_plain(encoders[i], count)
            sent += count
            batches += 1
        next_due_s = t0 + (sent + 1) / rate
        await asyncio.sleep(max(tick_s, next_due_s - time.perf_counter()))
    return batches


# ------------------------------------------------------------------------------------------------
# Consumer


def run_consumer(kw: dict, signal_ready, wait_start) -> dict:
    return uvloop.run(_consume(kw, signal_ready, wait_start))


class _Tally:
    """What one consumer process saw. shared: multiprocessing.Value summing every process's count."""

    def __init__(self, kw: dict) -> None:
        self.kw = kw
        self.shared = kw["shared_count"]
        self.expected = kw["expected"]
        self.messages = 0
        self.bytes = 0
        self.entries = 0
        self.redelivered = 0
        self.verify_errors: list[str] = []
        self.next_sequence: dict[tuple[str, str], int] = {}  # (topic, producer) -> next seq id
        self.e2e = LatencyHistogram()
        self.last_progress_s = time.monotonic()
        self.last_receive_s = 0.0

    def done(self) -> bool:
        return self.shared.value >= self.expected

    def add(self, consumer, entries: list[ReceivedEntry]) -> None:
        count = 0
        for entry in entries:
            n = entry.num_messages
            count += n
            self.e2e.record(max(0.0, entry.received_s - entry.metadata.publish_time / 1000.0), n)
            if entry.redelivery_count:
                self.redelivered += n
            if self.kw["verify"]:
                self._verify(consumer.topic, entry)
        self.messages += count
        self.bytes += count * self.kw["size"]
        self.entries += len(entries)
        with self.shared.get_lock():
            self.shared.value += count
        self.last_progress_s = time.monotonic()
        self.last_receive_s = time.time()

    def _verify(self, topic: str, entry: ReceivedEntry) -> None:
        members = entry.messages()
        md = entry.metadata
        if len(members) != entry.num_messages:
            self.verify_errors.append(
                f"entry {entry.entry_id}: {len(members)} members, header says {entry.num_messages}")
        bad = [m for m in members if len(m.payload) != self.kw["size"]]
        if bad:
            self.verify_errors.append(f"entry {entry.entry_id}: {len(bad)} payloads of the wrong size")
        key = (topic, md.producer_name)
        expected = self.next_sequence.get(key, md.sequence_id)
        if md.sequence_id != expected:
            self.verify_errors.append(f"{key}: sequence {md.sequence_id}, expected {expected}")
        self.next_sequence[key] = md.sequence_id + len(members)
        del self.verify_errors[100:]  # bounded: the first hundred tell the story


async def _consume(kw: dict, signal_ready, wait_start) -> dict:
    client = NativeClient(kw["service_url"], token=kw.get("token", ""), tls_trust_file=kw.get("tls_trust_file", ""))
    try:
        consumers = await client.subscribe(kw["topic"], kw["subscription"], sub_type=kw.get("sub_type", SUB_EXCLUSIVE),
                                           initial_position=EARLIEST, receiver_queue_size=kw["receiver_queue"],
                                           send_flow=False)
        tally = _Tally(kw)
        signal_ready()
        await asyncio.get_running_loop().run_in_executor(None, wait_start)
        start_s = time.time()
        tally.last_progress_s = time.monotonic()
        for consumer in consumers:
            consumer.flow(kw["receiver_queue"])
        await asyncio.gather(*(_drain(consumer, tally) for consumer in consumers))
        for consumer in consumers:
            await consumer.close()
    finally:
        await client.close()
    return {"received": tally.messages, "bytes": tally.bytes, "entries": tally.entries,
            "redelivered": tally.redelivered, "verify_errors": tally.verify_errors,
            "start_s": start_s, "end_s": tally.last_receive_s or time.time(), "e2e": tally.e2e.to_dict()}


async def _drain(consumer, tally: _Tally) -> None:
    """Receive and ack until every consumer together got `expected`, or nothing came for a while."""
    cumulative = tally.kw["ack"] == "cumulative"
    idle_timeout_s = tally.kw["idle_timeout_s"]
    while not tally.done():
        entries = await consumer.receive_entries(timeout_s=RECEIVE_POLL_S)
        if not entries:
            if time.monotonic() - tally.last_progress_s > idle_timeout_s:
                return
            continue
        tally.add(consumer, entries)
        if cumulative:
            consumer.ack_cumulative(entries[-1])
        else:
            for entry in entries:
                consumer.ack(entry)
    await consumer.flush_acks()
