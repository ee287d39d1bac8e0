"""The confluent-kafka side of `strata perf kafka`: a producer and a consumer worker (spawned
processes, perf.harness.WorkerPool), and the long-poll latency probes of both protocols.

Producer (`run_producer`): one confluent-kafka Producer (librdkafka), `linger_ms`, acks=all,
idempotent or not, N copies of one random payload to partition 0 as fast as its queue takes
them (BufferError: poll and retry), then flush. Delivery reports only for errors (a Python
callback per message would cost the load generator, not the broker); any error fails the run.
Messages per batch come from librdkafka's statistics (the topic's `batchcnt` window, summed).

Consumer (`run_consumer`): one confluent-kafka Consumer, `assign()` from offset 0 (a group.id
because librdkafka requires one; nothing is committed), `consume()` until N records are in.

Group against assign (`produce_backlog`, then `run_reader` in each of M workers): a backlog of N
records spread over M partitions, then M readers that stop once all N are in (a shared count):
either M members of one consumer group (`subscribe()`, `enable.auto.commit=true`,
`auto.commit.interval.ms`) or the same M consumers each `assign()`ed one partition from offset 0
(no group, nothing committed). A member joins the group during set-up (unmeasured): it holds
the partitions it is given without fetching (an empty assign() in the rebalance callback) and
reports ready once it holds its share; at the start signal it assigns them (committed offsets
fetched, then records). Successful and failed commits are counted (`on_commit`, served by consume()), and
reported with their first errors.

Long poll (`kafka_long_poll`, `pulsar_long_poll`): a consumer waits at the end of a topic, a
producer sends one record every `interval_s` with no batching delay, each record's value
carries its send time (time.time(), packed); latency = receive time - send time, same clock.
The Kafka consumer fetches with `fetch.wait.max.ms` (Kafka's default 500): the broker holds
the fetch until data arrives, so the latency is how fast an append wakes a parked fetch.
The first `WARMUP` records are not counted (connections, the first fetch).

What must hold: every wait is bounded (TimeoutExpired); every buffer is bounded (librdkafka's
queue, the error lists); a worker that fails reports its error, never a partial figure.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
import uuid

from common.errors import StrataError, TimeoutExpired
from perf.harness import LatencyHistogram

CALL_TIMEOUT_S = 30.0          # metadata, flush, close
IDLE_TIMEOUT_S = 30.0          # a consumer that received nothing for this long gives up
ERRORS_KEPT = 10
STATS_INTERVAL_MS = 500
WARMUP = 5                     # long-poll records not counted
START_POLL_S = 0.01            # a reader waiting for the start signal (a group member keeps polling)
STAMP = struct.Struct(">d")    # send time, seconds since the epoch, at the head of the value


def _check_topic(client, topic: str, partitions: int = 1) -> None:
    """The topic exists with exactly `partitions` partitions (asked of the broker, bounded)."""
    md = client.list_topics(topic, timeout=CALL_TIMEOUT_S)
    t = md.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != partitions:
        raise StrataError("Kafka topic not ready", topic=topic, error=str(t.error if t else "missing"),
                          partitions=len(t.partitions) if t else 0)


class _Batches:
    """Messages per produce batch from librdkafka's statistics: each window's batchcnt (avg, cnt), summed."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.messages = 0.0
        self.batches = 0

    def on_stats(self, text: str) -> None:
        window = json.loads(text).get("topics", {}).get(self.topic, {}).get("batchcnt", {})
        count = int(window.get("cnt", 0))
        self.batches += count
        self.messages += float(window.get("avg", 0)) * count

    def per_batch(self) -> float | None:
        return round(self.messages / self.batches, 1) if self.batches else None


def run_producer(kw: dict, signal_ready, wait_start) -> dict:
    from confluent_kafka import KafkaException, Producer

    topic, n = kw["topic"], kw["messages"]
    errors: list[str] = []
    batches = _Batches(topic)

    def on_delivery(err, msg) -> None:  # errors only (delivery.report.only.error)
        if err is not None and len(errors) < ERRORS_KEPT:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": kw["bootstrap"], "linger.ms": kw["linger_ms"], "acks": "all",
                         "enable.idempotence": kw["idempotent"], "delivery.report.only.error": True,
                         "on_delivery": on_delivery, "message.timeout.ms": int(kw["timeout_s"] * 1000),
                         "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": batches.on_stats})
    _check_topic(producer, topic)
    payload = os.urandom(kw["size"])
    signal_ready()
    wait_start()
    start_s = time.time()
    deadline = time.monotonic() + kw["timeout_s"]
    produce, poll = producer.produce, producer.poll
    for i in range(n):
        while True:
            try:
                produce(topic, payload, partition=0)
                break
            except BufferError:          # librdkafka's queue is full (bounded): let it drain
                poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutExpired("Kafka producer queue never drained", timeout_s=kw["timeout_s"]) from None
        if not i & 1023:
            poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    end_s = time.time()
    if left:
        raise TimeoutExpired("Kafka producer flush", undelivered=left, timeout_s=kw["timeout_s"])
    if errors:
        raise StrataError("Kafka deliveries failed", errors=errors)
    try:
        producer.poll(STATS_INTERVAL_MS * 2 / 1000)   # one more statistics window
    except KafkaException:
        pass
    return {"messages": n, "bytes": n * kw["size"], "start_s": start_s, "end_s": end_s,
            "messages_per_batch": batches.per_batch()}


def run_consumer(kw: dict, signal_ready, wait_start) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    topic, expected = kw["topic"], kw["expected"]
    consumer = Consumer({"bootstrap.servers": kw["bootstrap"], "group.id": f"perf-kafka-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest"})
    try:
        _check_topic(consumer, topic)
        signal_ready()
        wait_start()
        start_s = last_s = time.time()
        consumer.assign([TopicPartition(topic, 0, 0)])
        received = total_bytes = 0
        last_progress = time.monotonic()
        deadline = last_progress + kw["timeout_s"]
        while received < expected:
            now = time.monotonic()
            if now - last_progress > IDLE_TIMEOUT_S or now > deadline:
                raise TimeoutExpired("Kafka consumer stalled", received=received, expected=expected,
                                     idle_timeout_s=IDLE_TIMEOUT_S)
            msgs = consumer.consume(num_messages=10_000, timeout=0.2)
            if not msgs:
                continue
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    raise StrataError("Kafka consumer error", error=str(err))
                total_bytes += len(msg.value() or b"")
            received += len(msgs)
            last_s = time.time()
            last_progress = time.monotonic()
    finally:
        consumer.close()
    return {"received": received, "bytes": total_bytes, "start_s": start_s, "end_s": last_s}


# ------------------------------------------------------------------------------------------------
# A consumer group against assign(), on one backlog


def produce_backlog(bootstrap: str, topic: str, partitions: int, messages: int, size: int, linger_ms: int,
                    timeout_s: float) -> list[int]:
    """`messages` records of `size` bytes, round-robin over the partitions, acks=all, flushed (in
    this process, unmeasured); the count in each partition."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None and len(errors) < ERRORS_KEPT:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": "all",
                         "delivery.report.only.error": True, "on_delivery": on_delivery,
                         "message.timeout.ms": int(timeout_s * 1000)})
    _check_topic(producer, topic, partitions)
    payload = os.urandom(size)
    deadline = time.monotonic() + timeout_s
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutExpired("Kafka backlog producer queue never drained", timeout_s=timeout_s) from None
        if not i & 1023:
            producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    if left or errors:
        raise StrataError("Kafka backlog not produced", undelivered=left, errors=errors)
    return [len(range(p, messages, partitions)) for p in range(partitions)]


class _Commits:
    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0
        self.errors: list[str] = []

    def on_commit(self, err, partitions) -> None:
        if err is None:
            self.ok += 1
        else:
            self.failed += 1
            if len(self.errors) < ERRORS_KEPT:
                self.errors.append(str(err))


def _reader_conf(kw: dict, commits: _Commits) -> dict:
    conf = {"bootstrap.servers": kw["bootstrap"], "auto.offset.reset": "earliest"}
    if kw["mode"] == "group":
        conf.update({"group.id": kw["group"], "enable.auto.commit": True,
                     "auto.commit.interval.ms": kw["commit_interval_ms"], "on_commit": commits.on_commit})
    else:
        conf.update({"group.id": f"perf-kafka-assign-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                     "enable.auto.offset.store": False})
    return conf


class _Start:
    """The start signal, waited for on a thread, so a group member keeps polling (heartbeats,
    rebalances) meanwhile; a member's rebalance callback holds what it is given until the start."""

    def __init__(self, wait_start) -> None:
        self.go = threading.Event()
        self.failed: list[BaseException] = []
        self.held: list = []
        self._wait_start = wait_start

    def begin(self) -> None:
        threading.Thread(target=self._wait, name="wait-start", daemon=True).start()

    def _wait(self) -> None:
        try:
            self._wait_start()
        except BaseException as exc:   # no start signal: the waiting loop's bound ends the run
            self.failed.append(exc)
        self.go.set()

    def on_assign(self, consumer, parts) -> None:
        if self.go.is_set():
            consumer.assign(parts)
        else:                          # set-up is unmeasured: hold the partitions, fetch nothing
            self.held[:] = parts
            consumer.assign([])


def run_reader(kw: dict, signal_ready, wait_start) -> dict:
    """One of M readers of a backlog of `expected` records over M partitions (kw: bootstrap, topic,
    partitions, members, index, mode "group" | "assign", group, commit_interval_ms, expected,
    shared_count, timeout_s): read until the readers together have every record."""
    from confluent_kafka import Consumer, TopicPartition

    group_mode = kw["mode"] == "group"
    commits = _Commits()
    consumer = Consumer(_reader_conf(kw, commits))
    start = _Start(wait_start)
    try:
        _check_topic(consumer, kw["topic"], kw["partitions"])
        deadline = time.monotonic() + kw["timeout_s"]
        if group_mode:
            consumer.subscribe([kw["topic"]], on_assign=start.on_assign)
            while len(start.held) < kw["partitions"] // kw["members"]:     # joined, with its share, held
                if time.monotonic() > deadline:
                    raise TimeoutExpired("group member got no partitions", group=kw["group"], timeout_s=kw["timeout_s"])
                consumer.poll(0.1)
        start.begin()
        signal_ready()
        while not start.go.is_set():                            # keep serving the group until the start
            if time.monotonic() > deadline:
                raise TimeoutExpired("no start signal", timeout_s=kw["timeout_s"])
            if group_mode:
                consumer.poll(START_POLL_S)
            else:
                start.go.wait(START_POLL_S)
        if start.failed:
            raise start.failed[0]
        start_s = time.time()
        if group_mode:
            consumer.assign(start.held)                         # its committed offsets, then fetches
        else:
            consumer.assign([TopicPartition(kw["topic"], kw["index"], 0)])
        received, total_bytes, last_s = _read_shared(consumer, kw["shared_count"], kw["expected"], kw["timeout_s"])
    finally:
        consumer.close()                # a group member commits its last offsets here
    return {"received": received, "bytes": total_bytes, "start_s": start_s, "end_s": last_s or start_s,
            "commits": commits.ok, "commits_failed": commits.failed, "commit_errors": commits.errors}


def _read_shared(consumer, shared, expected: int, timeout_s: float) -> tuple[int, int, float | None]:
    """consume() until the readers' shared count reaches `expected`: (records, bytes, last receipt time)."""
    received = total_bytes = 0
    last_s = None
    last_progress = time.monotonic()
    deadline = last_progress + timeout_s
    while shared.value < expected:
        now = time.monotonic()
        if now - last_progress > IDLE_TIMEOUT_S or now > deadline:
            raise TimeoutExpired("Kafka reader stalled", received=received, all_received=shared.value,
                                 expected=expected, idle_timeout_s=IDLE_TIMEOUT_S)
        msgs = consumer.consume(num_messages=10_000, timeout=0.2)
        if not msgs:
            continue
        for msg in msgs:
            err = msg.error()
            if err is not None:
                raise StrataError("Kafka consumer error", error=str(err))
            total_bytes += len(msg.value() or b"")
        received += len(msgs)
        with shared.get_lock():
            shared.value += len(msgs)
        last_s = time.time()
        last_progress = time.monotonic()
    return received, total_bytes, last_s


# ------------------------------------------------------------------------------------------------
# Long-poll latency


class _Receiver:
    """Latencies of received stamped values; `count` counted after the first WARMUP; bounded waits."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.hist = LatencyHistogram()
        self.seen = 0
        self.error: str | None = None
        self.done = threading.Event()
        self.stop = threading.Event()

    def got(self, value: bytes | None, received_s: float) -> None:
        if value is None or len(value) < STAMP.size:
            self.error = f"a value without a send time: {value!r:.80}"
            self.done.set()
            return
        self.seen += 1
        if self.seen > WARMUP:
            self.hist.record(max(0.0, received_s - STAMP.unpack_from(value)[0]))
        if self.seen >= WARMUP + self.count:
            self.done.set()

    def result(self) -> dict:
        return {"records": self.hist.total, "p50_ms": self.hist.percentile_ms(50),
                "p99_ms": self.hist.percentile_ms(99), "max_ms": self.hist.percentile_ms(100)}


def _send_every(send, receiver: _Receiver, interval_s: float, timeout_s: float, what: str) -> None:
    """send(value) every interval_s until the receiver has all it needs; bounded."""
    deadline = time.monotonic() + timeout_s
    next_s = time.monotonic()
    sent = 0
    while not receiver.done.is_set():
        if time.monotonic() > deadline:
            raise TimeoutExpired(f"{what} long poll: records missing", sent=sent, received=receiver.seen,
                                 timeout_s=timeout_s)
        next_s += interval_s
        send(STAMP.pack(time.time()) + b"x" * 64)
        sent += 1
        receiver.done.wait(max(0.0, next_s - time.monotonic()))
    if receiver.error:
        raise StrataError(f"{what} long poll", error=receiver.error)


def kafka_long_poll(bootstrap: str, topic: str, count: int, interval_s: float, fetch_wait_ms: int,
                    timeout_s: float) -> dict:
    """A consumer parked at the end of `topic` (assigned at its high watermark), a producer sending one
    stamped record every interval_s with linger.ms=0; latency percentiles of `count` records."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                         "message.timeout.ms": int(timeout_s * 1000)})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"perf-kafka-lp-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "fetch.wait.max.ms": fetch_wait_ms, "auto.offset.reset": "latest"})
    receiver = _Receiver(count)
    try:
        _check_topic(consumer, topic)
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=CALL_TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, high)])

        def receive() -> None:
            while not receiver.stop.is_set() and not receiver.done.is_set():
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                received_s = time.time()
                if msg.error() is not None:
                    receiver.error = str(msg.error())
                    receiver.done.set()
                    return
                receiver.got(msg.value(), received_s)

        thread = threading.Thread(target=receive, name="kafka-long-poll", daemon=True)
        thread.start()

        def send(value: bytes) -> None:
            producer.produce(topic, value, partition=0)
            producer.poll(0)

        try:
            _send_every(send, receiver, interval_s, timeout_s, "Kafka")
        finally:
            receiver.stop.set()
            thread.join(timeout=CALL_TIMEOUT_S)
        producer.flush(CALL_TIMEOUT_S)
    finally:
        consumer.close()
    return {**receiver.result(), "fetch_wait_max_ms": fetch_wait_ms}


def pulsar_long_poll(service_url: str, topic: str, count: int, interval_s: float, timeout_s: float) -> dict:
    """The same with the official Pulsar client: a consumer (pushed to, no polling on the wire) and a
    producer without batching, one stamped message every interval_s."""
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=int(CALL_TIMEOUT_S),
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    receiver = _Receiver(count)
    try:
        consumer = client.subscribe(topic, "perf-kafka-long-poll", consumer_type=pulsar.ConsumerType.Exclusive,
                                    initial_position=pulsar.InitialPosition.Latest)
        producer = client.create_producer(topic, batching_enabled=False,
                                          send_timeout_millis=int(timeout_s * 1000))

        def receive() -> None:
            while not receiver.stop.is_set() and not receiver.done.is_set():
                try:
                    msg = consumer.receive(100)
                except pulsar.Timeout:
                    continue
                received_s = time.time()
                consumer.acknowledge(msg)
                receiver.got(msg.data(), received_s)

        thread = threading.Thread(target=receive, name="pulsar-long-poll", daemon=True)
        thread.start()
        try:
            _send_every(lambda value: producer.send_async(value, None), receiver, interval_s, timeout_s, "Pulsar")
        finally:
            receiver.stop.set()
            thread.join(timeout=CALL_TIMEOUT_S)
        producer.flush()
        producer.close()
        consumer.close()
    finally:
        client.close()
    return receiver.result()
