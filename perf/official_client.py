"""The official-client driver's worker loops (`--driver pulsar-client`): what a Python user gets.

Producer: `pulsar.Client.create_producer` with batching on (1,000 messages / 128 KiB /
`batch_delay_ms`), `send_async` under a bounded in-flight window (`max_pending`, a semaphore
released by the completion callback, which runs on the client's I/O thread), publish latency per
message from the `send_async` call to its callback. With `rate` the sends follow a fixed
schedule (message i due at i / rate).

Consumer: `receive` loop with individual (or cumulative) acks; end-to-end latency from
`publish_timestamp()` to receipt. Consumers of one run share a counter and stop when it reaches
`expected` or nothing arrived for `idle_timeout_s`.

One Python process of this client is client-bound (about 25 us of client CPU per message), so
its figures say what the client costs, not what the broker can do.
"""

from __future__ import annotations

import os
import threading
import time

from common.errors import StrataError, TimeoutExpired
from perf.harness import LatencyHistogram

SEND_TIMEOUT_S = 30.0
RECEIVE_POLL_MS = 200


def _client(service_url: str, token: str = "", tls_trust_file: str = ""):
    try:
        import pulsar
    except ImportError:
        raise StrataError("--driver pulsar-client needs the official client: pip install pulsar-client") from None
    secured: dict = {}
    if token:
        secured["authentication"] = pulsar.AuthenticationToken(token)
    if tls_trust_file:
        secured["tls_trust_certs_file_path"] = tls_trust_file
    return pulsar.Client(service_url, operation_timeout_seconds=30,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), **secured)


def _compression(name: str):
    import pulsar
    return {"none": pulsar.CompressionType.NONE, "lz4": pulsar.CompressionType.LZ4,
            "zstd": pulsar.CompressionType.ZSTD, "zlib": pulsar.CompressionType.ZLib}[name]


class _Window:
    """Bounded in-flight sends: acquire before send_async, release in its callback."""

    def __init__(self, size: int) -> None:
        import pulsar
        self.ok = pulsar.Result.Ok
        self.slots = threading.Semaphore(size)
        self.hist = LatencyHistogram()
        self.errors: list[str] = []  # bounded: only the first few results that were not Ok

    def callback(self, started_s: float):
        def done(result, msg_id) -> None:
            self.hist.record(time.perf_counter() - started_s)
            if result != self.ok and len(self.errors) < 10:
                self.errors.append(str(result))
            self.slots.release()
        return done


def run_producer(kw: dict, signal_ready, wait_start) -> dict:
    client = _client(kw["service_url"], kw.get("token", ""), kw.get("tls_trust_file", ""))
    try:
        producer = client.create_producer(
            kw["topic"], batching_enabled=True, batching_max_messages=1000,
            batching_max_allowed_size_in_bytes=128 * 1024,
            batching_max_publish_delay_ms=max(1, int(kw["batch_delay_ms"])),
            compression_type=_compression(kw["compression"]), block_if_queue_full=True,
            max_pending_messages=kw["max_pending"], send_timeout_millis=int(SEND_TIMEOUT_S * 1000))
        window = _Window(kw["max_pending"])
        payload = os.urandom(kw["size"])
        signal_ready()
        wait_start()
        start_s = time.time()
        _send_all(producer, window, payload, kw)
        producer.flush()
        _wait_window_empty(window, kw["max_pending"])
        end_s = time.time()
        producer.close()
    finally:
        client.close()
    if window.errors:
        raise StrataError("sends failed", results=window.errors)
    return {"messages": kw["messages"], "bytes": kw["messages"] * kw["size"], "batches": None,
            "start_s": start_s, "end_s": end_s, "latency": window.hist.to_dict()}


def _send_all(producer, window: _Window, payload: bytes, kw: dict) -> None:
    rate = float(kw["rate"]) if kw.get("rate") else None
    t0 = time.perf_counter()
    for i in range(kw["messages"]):
        if rate is not None:
            ahead_s = t0 + i / rate - time.perf_counter()
            if ahead_s > 0.001:
                time.sleep(ahead_s)
        if not window.slots.acquire(timeout=SEND_TIMEOUT_S):
            raise TimeoutExpired("no send completions", timeout_s=SEND_TIMEOUT_S)
        producer.send_async(payload, window.callback(time.perf_counter()))


def _wait_window_empty(window: _Window, size: int) -> None:
    """Every callback ran: all `size` slots can be taken back."""
    deadline = time.monotonic() + SEND_TIMEOUT_S
    for _ in range(size):
        if not window.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutExpired("send callbacks missing", timeout_s=SEND_TIMEOUT_S)


def run_consumer(kw: dict, signal_ready, wait_start) -> dict:
    import pulsar
    client = _client(kw["service_url"], kw.get("token", ""), kw.get("tls_trust_file", ""))
    shared, expected = kw["shared_count"], kw["expected"]
    sub_type = pulsar.ConsumerType.Shared if kw.get("shared") else pulsar.ConsumerType.Exclusive
    try:
        consumer = client.subscribe(kw["topic"], kw["subscription"], consumer_type=sub_type,
                                    receiver_queue_size=kw["receiver_queue"],
                                    initial_position=pulsar.InitialPosition.Earliest)
        e2e = LatencyHistogram()
        received = bad = 0
        signal_ready()
        wait_start()
        start_s = last_s = time.time()
        last_progress = time.monotonic()
        while shared.value < expected and time.monotonic() - last_progress < kw["idle_timeout_s"]:
            try:
                msg = consumer.receive(RECEIVE_POLL_MS)
            except pulsar.Timeout:
                continue
            last_s = time.time()
            e2e.record(max(0.0, last_s - msg.publish_timestamp() / 1000.0))
            if kw["verify"] and len(msg.data()) != kw["size"]:
                bad += 1
            if kw["ack"] == "cumulative":
                consumer.acknowledge_cumulative(msg)
            else:
                consumer.acknowledge(msg)
            received += 1
            last_progress = time.monotonic()
            with shared.get_lock():
                shared.value += 1
        consumer.close()
    finally:
        client.close()
    return {"received": received, "bytes": received * kw["size"], "entries": None, "redelivered": 0,
            "verify_errors": [f"{bad} payloads of the wrong size"] if bad else [],
            "start_s": start_s, "end_s": last_s, "e2e": e2e.to_dict()}
