"""Helpers for the cluster acceptance tests (tests/cluster/): the official client, admin HTTP that
does not follow redirects unless told to (admin_client underneath), ownership as the metadata store
records it, and load generators that record every acknowledged and every received message with its
time.

What must hold:
- Nothing here hides a failure: a send whose callback is not Ok is recorded in `errors`, a
  receive that raises anything but a timeout is recorded in `errors`, and the tests assert on both.
- Every wait is bounded (tests.support.waiting), every thread stops within a bound, every queue
  is the client's own bounded one (block_if_queue_full with max_pending_messages).
- Payloads are `b"<seq>"`: the producer's own sequence, 0, 1, 2, ... per topic, so a consumer can
  tell loss (an acked seq never received), duplicates and order (first occurrences per partition
  must increase) without any other bookkeeping.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pulsar

from metadata import open_store
from tests.support.admin_http import exchange
from tests.support.waiting import wait_until

HTTP_TIMEOUT_S = 15.0
RECEIVE_POLL_MS = 200
THREAD_STOP_TIMEOUT_S = 30.0
CLIENT_OPERATION_TIMEOUT_S = 30
NAMESPACE_ROOT = "/namespace"
BROKERS_ROOT = "/loadbalance/brokers"
# the client's own log (reconnect errors are expected here): captured by pytest, shown on failure
CLIENT_LOG = logging.getLogger("tests.cluster.pulsar-client")
CLIENT_LOG.setLevel(logging.WARNING)


# --- the official client ---------------------------------------------------------------------

def make_client(service_url: str, **kwargs: Any) -> pulsar.Client:
    """The official client, quiet, with bounded operations."""
    kwargs.setdefault("operation_timeout_seconds", CLIENT_OPERATION_TIMEOUT_S)
    kwargs.setdefault("logger", CLIENT_LOG)
    return pulsar.Client(service_url, **kwargs)


def seq_of(msg: pulsar.Message) -> int:
    return int(msg.data())


# --- admin HTTP --------------------------------------------------------------------------------

@dataclass
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def location(self) -> str:
        return self.headers.get("location", "")

    @property
    def reason(self) -> str:
        """The `reason` of a Pulsar-style error body, or '' when there is none."""
        try:
            body = self.json()
        except ValueError:
            return ""
        return str(body.get("reason", "")) if isinstance(body, dict) else ""


def http(method: str, url: str, body: Any = None, *, follow: bool = False,
         timeout_s: float = HTTP_TIMEOUT_S) -> HttpAnswer:
    """One admin call (tests.support.admin_http, on admin_client); with follow=True a 307/308 is
    followed (same method and body, at most admin_client.REDIRECTS_MAX hops), otherwise the
    redirect itself is returned. Header names are lower-cased."""
    answer = exchange(method, url, body, follow=follow, timeout_s=timeout_s)
    return HttpAnswer(answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.body, answer.url)


def topic_path(topic: str) -> str:
    """persistent://t/ns/local -> persistent/t/ns/local (the REST form)."""
    domain, rest = topic.split("://", 1)
    return f"{domain}/{rest}"


def lookup(admin_url: str, topic: str) -> dict[str, Any]:
    """Pulsar's LookupData for `topic` from `admin_url` (assigning an owner if there is none)."""
    answer = http("GET", f"{admin_url}/lookup/v2/topic/{topic_path(topic)}", follow=True)
    assert answer.status == 200, (answer.status, answer.body, answer.url)
    data = answer.json()
    assert isinstance(data, dict) and data.get("brokerUrl"), data
    return data


def owners_by_lookup(admin_url: str, topics: Iterable[str]) -> dict[str, str]:
    """topic -> the owner's pulsar:// URL, as `admin_url`'s lookup answers."""
    return {t: lookup(admin_url, t)["brokerUrl"] for t in topics}


# --- the metadata store, read-only -------------------------------------------------------------

class MetadataView:
    """Reads ownership and registration keys from the cluster's metadata store (its own session,
    never writing). Calls fail while the database is down; `safe_*` variants answer None then."""

    def __init__(self, metadata_url: str) -> None:
        self.store = open_store(metadata_url)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.store.close()

    def bundle_owners(self, tenant: str | None = None, ns: str | None = None) -> dict[str, tuple[str, str | None]]:
        """'/namespace/t/ns/0x.._0x..' -> (nativeUrl, owner session) for every owned bundle."""
        prefix = NAMESPACE_ROOT if tenant is None else f"{NAMESPACE_ROOT}/{tenant}/{ns}"
        out = {}
        for path, versioned in self.store.list_prefix(prefix):
            data = json.loads(versioned.value)
            out[path] = (data.get("nativeUrl", ""), versioned.ephemeral_owner)
        return out

    def brokers(self) -> dict[str, tuple[dict[str, Any], str | None]]:
        """host:webPort -> (the registration JSON, its session) for every registered broker."""
        out = {}
        for path, versioned in self.store.list_prefix(BROKERS_ROOT):
            out[path.rsplit("/", 1)[1]] = (json.loads(versioned.value), versioned.ephemeral_owner)
        return out

    def safe(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:   # a database that is down answers None, the caller retries
            return None


# --- load -------------------------------------------------------------------------------------

@dataclass
class Ack:
    seq: int
    ledger_id: int
    entry_id: int
    partition: int
    at_s: float          # time.monotonic() of the callback


@dataclass
class Producing:
    """One producer on one topic sending b"<seq>" at about `rate_per_s` through send_async, in a
    thread. acks: seq -> Ack for every Ok callback; errors: (seq, result) for every other one."""

    client: pulsar.Client
    topic: str
    rate_per_s: float = 50.0
    producer_kwargs: dict[str, Any] = field(default_factory=dict)
    acks: dict[int, Ack] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        kwargs = {"block_if_queue_full": True, "max_pending_messages": 500, "batching_enabled": False,
                  **self.producer_kwargs}
        self.producer = self.client.create_producer(self.topic, **kwargs)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"produce {self.topic}", daemon=True)
        self._thread.start()

    def _callback(self, seq: int) -> Any:
        def done(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
            now = time.monotonic()
            with self._lock:
                if result == pulsar.Result.Ok:
                    self.acks[seq] = Ack(seq, msg_id.ledger_id(), msg_id.entry_id(), msg_id.partition(), now)
                else:
                    self.errors.append((seq, str(result)))
        return done

    def _run(self) -> None:
        interval_s = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.producer.send_async(str(self.sent).encode(), self._callback(self.sent))
            except Exception as exc:  # recorded, the test asserts there is none
                with self._lock:
                    self.errors.append((self.sent, f"send_async raised {exc!r}"))
                return
            self.sent += 1
            next_at += interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))   # pacing, not a wait for an event

    def acks_after(self, t_s: float) -> list[Ack]:
        with self._lock:
            return [a for a in self.acks.values() if a.at_s > t_s]

    def first_ack_after(self, t_s: float) -> float | None:
        later = [a.at_s for a in self.acks_after(t_s)]
        return min(later) if later else None

    def stop(self, drain_timeout_s: float = THREAD_STOP_TIMEOUT_S) -> None:
        """Stop sending and wait (bounded) until every sent message has its callback."""
        self._stop.set()
        self._thread.join(THREAD_STOP_TIMEOUT_S)
        assert not self._thread.is_alive(), f"producer thread of {self.topic} did not stop"
        with contextlib.suppress(Exception):
            self.producer.flush()
        wait_until(lambda: len(self.acks) + len(self.errors) >= self.sent, drain_timeout_s,
                   what=f"callbacks of all {self.sent} sends to {self.topic}")

    def close(self) -> None:
        """Stop the thread (closing the producer first frees a send blocked on a full queue)."""
        self._stop.set()
        with contextlib.suppress(Exception):
            self.producer.close()
        self._thread.join(THREAD_STOP_TIMEOUT_S)


@dataclass
class Received:
    seq: int
    partition: int
    ledger_id: int
    entry_id: int
    at_s: float


class Consuming:
    """One consumer receiving (and acking) in a thread. received: every message as delivered,
    redeliveries included; errors: anything a receive or an ack raised other than a timeout."""

    def __init__(self, client: pulsar.Client, topic: str, subscription: str,
                 consumer_type: pulsar.ConsumerType = pulsar.ConsumerType.Exclusive, **kwargs: Any) -> None:
        kwargs.setdefault("initial_position", pulsar.InitialPosition.Earliest)
        self.topic = topic
        self.subscription = subscription
        self.consumer = client.subscribe(topic, subscription, consumer_type=consumer_type, **kwargs)
        self.received: list[Received] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"consume {topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.consumer.receive(RECEIVE_POLL_MS)
            except pulsar.Timeout:
                continue
            except Exception as exc:  # recorded, the test asserts there is none
                with self._lock:
                    self.errors.append(f"receive raised {exc!r}")
                if self._stop.wait(0.1):
                    return
                continue
            mid = msg.message_id()
            with self._lock:
                self.received.append(Received(seq_of(msg), mid.partition(), mid.ledger_id(), mid.entry_id(),
                                              time.monotonic()))
            try:
                self.consumer.acknowledge(msg)
            except Exception as exc:  # recorded, the test asserts there is none
                with self._lock:
                    self.errors.append(f"acknowledge raised {exc!r}")

    def seqs(self) -> set[int]:
        with self._lock:
            return {r.seq for r in self.received}

    def received_after(self, t_s: float) -> int:
        with self._lock:
            return sum(1 for r in self.received if r.at_s > t_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(THREAD_STOP_TIMEOUT_S)
        assert not self._thread.is_alive(), f"consumer thread of {self.topic} did not stop"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.consumer.close()


def order_violations(stream: Iterable[Received]) -> list[str]:
    """Per partition, the first occurrence of each seq must come in increasing order (a
    redelivery or a resent duplicate repeats an older seq and is allowed; a newer seq followed
    by an older never-seen one is a reordering)."""
    seen: dict[int, set[int]] = {}
    last_new: dict[int, int] = {}
    problems = []
    for r in stream:
        part = seen.setdefault(r.partition, set())
        if r.seq in part:
            continue
        part.add(r.seq)
        if r.seq < last_new.get(r.partition, -1):
            problems.append(f"partition {r.partition}: new seq {r.seq} after {last_new[r.partition]}")
        last_new[r.partition] = max(r.seq, last_new.get(r.partition, -1))
    return problems


def read_all(client: pulsar.Client, topic: str, expect_at_least: int,
             timeout_s: float = 30.0) -> list[Received]:
    """Every message stored in `topic` from the earliest, through a Reader (partitioned topics:
    each partition), until `expect_at_least` are read and no more come for a second."""
    out: list[Received] = []
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        deadline = time.monotonic() + timeout_s
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            try:
                msg = reader.read_next(RECEIVE_POLL_MS)
            except pulsar.Timeout:
                if len(out) >= expect_at_least and time.monotonic() - quiet_since > 1.0:
                    return out
                continue
            quiet_since = time.monotonic()
            mid = msg.message_id()
            out.append(Received(seq_of(msg), mid.partition(), mid.ledger_id(), mid.entry_id(), time.monotonic()))
        raise AssertionError(f"read {len(out)} of at least {expect_at_least} from {topic} in {timeout_s} s")
    finally:
        with contextlib.suppress(Exception):
            reader.close()


def duplicates(stream: Iterable[Received]) -> list[tuple[int, int]]:
    """(partition, seq) pairs stored more than once."""
    seen: set[tuple[int, int]] = set()
    dup = []
    for r in stream:
        key = (r.partition, r.seq)
        if key in seen:
            dup.append(key)
        seen.add(key)
    return dup


def max_ack_gap_s(acks: Iterable[Ack], start_s: float, end_s: float) -> float:
    """The longest time without an ack inside [start_s, end_s] (the stall a move caused)."""
    times = sorted([start_s, end_s] + [a.at_s for a in acks if start_s < a.at_s < end_s])
    return max(b - a for a, b in itertools.pairwise(times))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
