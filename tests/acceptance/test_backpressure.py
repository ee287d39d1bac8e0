"""Backpressure toward clients, on a real `strata standalone`: a client that stops reading costs
the broker a bounded amount of memory, and loses nothing.

A raw client (tests/support/raw_client.py, with a 4 KiB receive buffer so the kernel holds little)
subscribes with 1,000,000 permits and never reads its socket while 100,000 messages of 1,000
bytes, batched 100 to an entry by the native client (perf/native_client.py), flow through the
same topic to another consumer. The broker's peak RSS (VmRSS of the standalone's broker process,
sampled every 20 ms) grows by the working set of the flow (the producer's 10 MB of pending
messages, the tail cache, ...): the module measures that first with nobody stalled, after a
warm-up flow, and a stalled consumer may add at most `STALL_COST_MAX_BYTES` to it — not the
~100 MB that flowed past it (without the gate the broker grew by 75 MB before the hard cap closed
the stalled connection). Messages are 1,000 bytes rather than 100 so that what an unbounded
buffer would hold stands well clear of the heap's own noise. Then the stalled client reads again
and gets every message.
- Exclusive: its own subscription; afterwards it gets all 100,000, in order.
- Shared: it shares the subscription with the native consumer, which gets everything the stalled
  one did not take; afterwards the stalled one reads what it took, and the two together hold
  every message exactly once.
- Requests: 10,000 PARTITIONED_METADATA sent without reading the answers; the connection works
  through them at most `broker_connection_requests_inflight_max` at a time, and every one is
  answered once the client reads.

The standalone runs with a small write buffer high mark (256 KiB) and tail cache (4 MiB), so the
bound is far below what flows; its keepalive is long, since a client that reads nothing cannot
answer PINGs. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable

import pytest

from admin_client import request_json
from common.config import KIB, MIB
from entries.entry import parse_entry
from perf.native_client import EARLIEST, SUB_EXCLUSIVE, SUB_SHARED, NativeClient
from proto import pulsar_api_pb2 as pb
from tests.support.raw_client import FRAME_BYTES_MAX, RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder, encode_command

MESSAGES = 100_000
MESSAGE_BYTES = 1_000
BATCH_MESSAGES = 100
PERMITS = 1_000_000
RECEIVE_BUFFER_BYTES = 4 * KIB
WRITE_BUFFER_HIGH_BYTES = 256 * KIB
CACHE_BYTES = 4 * MIB
REQUESTS_INFLIGHT_MAX = 32
WARM_UP_REQUESTS = 200
STALL_COST_MAX_BYTES = 16 * MIB     # over the flow's own peak; what flows past is ~100 MB
REQUESTS_RSS_GROWTH_MAX_BYTES = 14 * MIB  # one socket read decoded is ~5 MB; uncapped, 10,000 requests took +52 MB
FLOW_TIMEOUT_S = 60.0
RSS_SAMPLE_INTERVAL_S = 0.02
RECEIVE_POLL_S = 0.2


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("backpressure") / "data"
    env = {"STRATA_BROKER_CONNECTION_WRITE_BUFFER_BYTES_HIGH": str(WRITE_BUFFER_HIGH_BYTES),
           "STRATA_MANAGED_LEDGER_CACHE_BYTES_MAX": str(CACHE_BYTES),
           "STRATA_BROKER_CONNECTION_REQUESTS_INFLIGHT_MAX": str(REQUESTS_INFLIGHT_MAX),
           "STRATA_BROKER_KEEPALIVE_INTERVAL_MS": "600000"}
    with StandaloneProcess.start(data_dir, env=env) as sa:
        yield sa


@pytest.fixture(scope="module")
def unstalled_growth(standalone) -> int:
    """Peak RSS growth of the broker while the flow runs with nobody stalled (after a warm-up)."""
    for name in ("warm-up", "reference"):
        topic = f"persistent://public/default/backpressure-{name}-{os.getpid()}"
        with RssSampler(standalone.pid) as rss:
            other = asyncio.run(produce_and_consume(standalone.service_url, topic, "other", SUB_EXCLUSIVE))
        assert_all_in_order(other)
    print(f"\nbroker RSS {rss.baseline / MIB:.1f} MiB before, peak {rss.peak / MIB:.1f} MiB "
          f"(+{rss.growth / MIB:.1f} MiB) while {MESSAGES} messages flowed, nobody stalled")
    return rss.growth


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


class RssSampler:
    """The largest VmRSS of a process seen while the `with` block runs (sampled in a thread)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.baseline = rss_bytes(pid)
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(RSS_SAMPLE_INTERVAL_S):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.peak = max(self.peak, rss_bytes(self.pid))

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


class StalledClient(RawClient):
    """A RawClient whose socket has a small receive buffer (set before connecting)."""

    def __init__(self, port: int, timeout_s: float = 20.0) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        sock.settimeout(timeout_s)
        sock.connect(("127.0.0.1", port))
        self.sock = sock
        self.decoder = FrameDecoder(FRAME_BYTES_MAX)
        self.frames: list = []
        self.timeout_s = timeout_s

    def subscribe(self, topic: str, subscription: str, sub_type: int, consumer_id: int = 1) -> None:
        self.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription=subscription, subType=sub_type, consumer_id=consumer_id,
            request_id=consumer_id, consumer_name="stalled", initialPosition=EARLIEST)))
        reply = self.next_command()
        assert reply.type == T.SUCCESS, reply
        self.send(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=consumer_id, messagePermits=PERMITS)))

    def read_messages(self, until: Callable[[list], bool], timeout_s: float) -> list[tuple[int, int, int, int]]:
        """(ledger id, entry id, first sequence id, messages) of every MESSAGE, until `until(got)`."""
        got: list[tuple[int, int, int, int]] = []
        deadline = time.monotonic() + timeout_s
        while not until(got):
            assert time.monotonic() < deadline, f"stalled client read only {len(got)} entries"
            frame = self.next_frame()
            if frame.command.type != T.MESSAGE:
                continue
            mid = frame.command.message.message_id
            info = parse_entry(frame.entry)
            got.append((mid.ledgerId, mid.entryId, info.metadata.sequence_id, info.num_messages))
        return got


def messages_in(got: list) -> int:
    return sum(entry[3] for entry in got)


async def produce_and_consume(url: str, topic: str, subscription: str, sub_type: int,
                              held_elsewhere: Callable[[], int] = lambda: 0) -> list[tuple[int, int, int, int]]:
    """Produce MESSAGES (batched) while a native consumer on `subscription` receives and acks
    until it holds all of them but `held_elsewhere()` (asked once the producer is done); returns
    what it received."""
    client = NativeClient(url)
    try:
        [consumer] = await client.subscribe(topic, subscription, sub_type=sub_type)
        [producer] = await client.create_producers(topic)
        encoder = producer.encoder(b"m" * MESSAGE_BYTES)

        async def produce() -> None:
            for _ in range(MESSAGES // BATCH_MESSAGES):
                await producer.send_plain(encoder, BATCH_MESSAGES)
            await producer.flush()

        sending = asyncio.get_running_loop().create_task(produce())
        got: list[tuple[int, int, int, int]] = []
        async with asyncio.timeout(FLOW_TIMEOUT_S):
            while True:
                for entry in await consumer.receive_entries(timeout_s=RECEIVE_POLL_S):
                    got.append((entry.ledger_id, entry.entry_id, entry.metadata.sequence_id, entry.num_messages))
                    consumer.ack(entry)
                if sending.done() and messages_in(got) + await asyncio.to_thread(held_elsewhere) >= MESSAGES:
                    break
            await sending
        await consumer.flush_acks()
        return got
    finally:
        await client.close()


def assert_all_in_order(got: list) -> None:
    """Every message once, in order: entries ascending, sequence ids contiguous from 0."""
    assert [e[:2] for e in got] == sorted(e[:2] for e in got)
    next_sequence = 0
    for _, _, first_sequence, count in got:
        assert first_sequence == next_sequence, (first_sequence, next_sequence)
        next_sequence += count
    assert next_sequence == MESSAGES


def test_requests_past_the_cap_wait_and_are_all_answered(standalone, topic) -> None:
    requests = 10_000
    client = StalledClient(standalone.port)
    try:
        client.connect()
        for request_id in range(1, WARM_UP_REQUESTS + 1):   # the path's first use allocates for good
            client.send_bytes(client_request(topic, request_id))
            assert client.next_command().type == T.PARTITIONED_METADATA_RESPONSE
        answered: set[int] = set()
        with RssSampler(standalone.pid) as rss:
            frames = b"".join(client_request(topic, request_id) for request_id in range(1, requests + 1))
            client.send_bytes(frames)   # answers unread; the broker reads REQUESTS_INFLIGHT_MAX ahead
            deadline = time.monotonic() + FLOW_TIMEOUT_S
            while len(answered) < requests:
                assert time.monotonic() < deadline, f"{len(answered)} of {requests} answered"
                reply = client.next_command()
                assert reply.type == T.PARTITIONED_METADATA_RESPONSE, reply
                response = reply.partitionMetadataResponse
                assert response.response == pb.CommandPartitionedTopicMetadataResponse.Success, response
                answered.add(response.request_id)
        assert answered == set(range(1, requests + 1))
        print(f"\nbroker RSS +{rss.growth / MIB:.1f} MiB for {requests} requests sent at once")
        assert rss.growth < REQUESTS_RSS_GROWTH_MAX_BYTES, rss.growth
    finally:
        client.close()


def test_stalled_exclusive_consumer_costs_bounded_memory_and_gets_everything(standalone, unstalled_growth,
                                                                            topic) -> None:
    stalled = StalledClient(standalone.port)
    try:
        stalled.connect()
        stalled.subscribe(topic, "stalled", SUB_EXCLUSIVE)
        with RssSampler(standalone.pid) as rss:
            other = asyncio.run(produce_and_consume(standalone.service_url, topic, "other", SUB_EXCLUSIVE))
        print(f"\nbroker RSS {rss.baseline / MIB:.1f} MiB before, peak {rss.peak / MIB:.1f} MiB "
              f"(+{rss.growth / MIB:.1f} MiB) while {MESSAGES} messages flowed past a stalled Exclusive consumer")
        assert_all_in_order(other)
        assert rss.growth < unstalled_growth + STALL_COST_MAX_BYTES, (rss.growth, unstalled_growth)
        got = stalled.read_messages(lambda got: messages_in(got) >= MESSAGES, FLOW_TIMEOUT_S)
        assert_all_in_order(got)
    finally:
        stalled.close()


def test_stalled_shared_consumer_is_skipped_and_keeps_what_it_took(standalone, unstalled_growth, topic) -> None:
    stalled = StalledClient(standalone.port)
    try:
        stalled.connect()
        stalled.subscribe(topic, "shared", SUB_SHARED)
        with RssSampler(standalone.pid) as rss:
            # the native consumer gets all but what the stalled one took before its buffer filled
            other = asyncio.run(produce_and_consume(standalone.service_url, topic, "shared", SUB_SHARED,
                                                    lambda: unacked_of(standalone, topic, "shared", "stalled")))
        print(f"\nbroker RSS +{rss.growth / MIB:.1f} MiB while {MESSAGES} messages flowed past a "
              "stalled Shared consumer")
        assert rss.growth < unstalled_growth + STALL_COST_MAX_BYTES, (rss.growth, unstalled_growth)
        taken = MESSAGES - messages_in(other)
        assert 0 < taken < MESSAGES // 4, taken
        got = stalled.read_messages(lambda got: messages_in(got) >= taken, FLOW_TIMEOUT_S)
        every = sorted(got + other)
        assert len({e[:2] for e in every}) == len(every), "an entry went to both consumers"
        assert_all_in_order(every)
    finally:
        stalled.close()


def client_request(topic: str, request_id: int) -> bytes:
    return encode_command(pb.BaseCommand(type=T.PARTITIONED_METADATA, partitionMetadata=(
        pb.CommandPartitionedTopicMetadata(topic=topic, request_id=request_id))))


def unacked_of(standalone: StandaloneProcess, topic: str, subscription: str, consumer_name: str) -> int:
    """The unacked messages the broker counts for one consumer (admin topic stats)."""
    path = topic.replace("persistent://", "")
    stats = request_json("GET", f"{standalone.admin_url}/admin/v2/persistent/{path}/stats", timeout_s=10)
    consumers = stats["subscriptions"][subscription]["consumers"]
    return sum(c["unackedMessages"] for c in consumers if c["consumerName"] == consumer_name)
