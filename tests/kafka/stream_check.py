"""An idempotent confluent-kafka producer sending a numbered stream while something is done to the
cluster, and the exactly-once check of what was stored (used by test_moves.py and test_restarts.py).

    stream = NumberedStream(bootstrap, topic, partitions)
    stream.send(range(0, 3000), pace_s=0.002, at={600: move_one, 1400: move_two})   # actions in a thread
    stream.finish()                                   # flush (bounded); no error, nothing fatal
    stored = read_partitions(bootstrap, topic, partitions, stream.expected())   # assign() from offset 0
    assert_exactly_once(stream, stored)

Record n goes to partition n % partitions with key `k<n>` and value `v<n>`. What must hold after:
every acknowledged record is stored exactly once in its partition, in the order sent (no duplicate,
no gap), offsets strictly increasing and equal to what the delivery reports said, and librdkafka
reported no error through error_cb (a fatal one, e.g. OUT_OF_ORDER_SEQUENCE_NUMBER after the
partition changed owner, is the bug this looks for; a transient one, a broker down, is printed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition

from tests.kafka.helpers import Rec
from tests.kafka.test_confluent import make_consumer, to_rec

FLUSH_BOUND_S = 90.0          # every record acknowledged within this after the last send
READ_BOUND_S = 60.0           # reading every partition back
ACTION_BOUND_S = 60.0         # an action run from the sending loop finishes within this


def key_of(n: int) -> bytes:
    return f"k{n:06d}".encode()


def value_of(n: int) -> bytes:
    return f"v{n:06d}".encode() + b"." * (n % 50)


def seq_of(rec: Rec) -> int:
    return int((rec.key or b"k-1")[1:])


@dataclass
class NumberedStream:
    bootstrap: str
    topic: str
    partitions: int
    message_timeout_ms: int = 60_000
    delivered: dict[int, tuple[int, int]] = field(default_factory=dict)   # n -> (partition, offset)
    failed: dict[int, str] = field(default_factory=dict)                  # n -> delivery error
    client_errors: list[KafkaError] = field(default_factory=list)         # error_cb
    sent: list[int] = field(default_factory=list)
    action_errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": self.message_timeout_ms,
                                  "socket.timeout.ms": 10_000, "error_cb": self.client_errors.append})

    def _cb(self, n: int) -> Callable:
        def done(err, msg) -> None:
            if err is not None:
                self.failed[n] = str(err)
            else:
                self.delivered[n] = (msg.partition(), msg.offset())
        return done

    def send(self, numbers: Iterable[int], pace_s: float = 0.0,
             at: dict[int, Callable[[], None]] | None = None) -> None:
        """Send each n (pace_s apart); when n is a key of `at`, its action starts in a thread while
        the sending goes on (one action at a time: the next waits for the one before, bounded)."""
        running: threading.Thread | None = None
        for n in numbers:
            if at and n in at:
                if running is not None:
                    running.join(ACTION_BOUND_S)
                    assert not running.is_alive(), f"the action before #{n} did not finish in {ACTION_BOUND_S} s"
                running = threading.Thread(target=self._run_action, args=(at[n],), daemon=True)
                running.start()
            self._produce(n)
            self.producer.poll(0)
            if pace_s:
                time.sleep(pace_s)
        if running is not None:
            running.join(ACTION_BOUND_S)
            assert not running.is_alive(), f"the last action did not finish in {ACTION_BOUND_S} s"
        assert not self.action_errors, f"an action failed: {self.action_errors!r}"

    def _produce(self, n: int) -> None:
        while True:
            try:
                self.producer.produce(self.topic, key=key_of(n), value=value_of(n), partition=n % self.partitions,
                                      on_delivery=self._cb(n))
                self.sent.append(n)
                return
            except BufferError:          # the local queue is full (a broker is away): let it drain
                self.producer.poll(0.1)

    def _run_action(self, action: Callable[[], None]) -> None:
        try:
            action()
        except BaseException as e:       # reported by send(), in the test's thread
            self.action_errors.append(e)

    def finish(self, flush_bound_s: float = FLUSH_BOUND_S) -> None:
        """Flush (bounded): every record acknowledged, no delivery error, nothing fatal."""
        left = self.producer.flush(flush_bound_s)
        fatal = [e for e in self.client_errors if e.fatal()]
        assert not fatal, f"librdkafka reported a FATAL error: {fatal}"
        assert left == 0, f"{left} records not acknowledged within {flush_bound_s} s"
        assert not self.failed, f"{len(self.failed)} records failed, e.g. {sorted(self.failed.items())[:5]}"
        assert sorted(self.delivered) == sorted(self.sent), "delivery reports missing"
        if self.client_errors:
            print(f"transient client errors (not fatal): {[str(e) for e in self.client_errors][:10]}")

    def expected(self) -> dict[int, list[int]]:
        """partition -> the numbers sent to it, in the order sent."""
        out: dict[int, list[int]] = {p: [] for p in range(self.partitions)}
        for n in self.sent:
            out[n % self.partitions].append(n)
        return out


def read_partitions(bootstrap: str, topic: str, partitions: int, expect: dict[int, list[int]]) -> dict[int, list[Rec]]:
    """Every partition read by one consumer with assign() from offset 0, until each has at least what
    was sent to it and has reported its end after that (bounded, READ_BOUND_S)."""
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    consumer = make_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + READ_BOUND_S
        while not all(p in at_end and len(out[p]) >= len(expect[p]) for p in range(partitions)):
            assert time.monotonic() < deadline, \
                f"read {[len(out[p]) for p in out]} of {[len(expect[p]) for p in out]} records in {READ_BOUND_S} s"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is None:
                    out[msg.partition()].append(to_rec(msg))
                    at_end.discard(msg.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    raise AssertionError(f"consumer error: {err}")
    finally:
        consumer.close()
    return out


def assert_exactly_once(stream: NumberedStream, stored: dict[int, list[Rec]], first_offset: int = 0) -> None:
    """Each partition holds exactly the numbers sent to it, in order, once each, at offsets
    first_offset, first_offset+1, ... (nothing else writes the topic), as the delivery reports said."""
    expect = stream.expected()
    for p in range(stream.partitions):
        got = stored[p]
        numbers = [seq_of(r) for r in got]
        dups = sorted({n for n in numbers if numbers.count(n) > 1})
        missing = sorted(set(expect[p]) - set(numbers))
        assert not dups and not missing and numbers == expect[p], (
            f"partition {p}: {len(numbers)} stored, {len(expect[p])} sent; duplicates {dups[:10]}, "
            f"missing {missing[:10]}, first difference at "
            f"{next((i for i, (a, b) in enumerate(zip(numbers, expect[p])) if a != b), None)}")
        for r in got:
            assert r.value == value_of(seq_of(r)), (p, r)
        offsets = [r.offset for r in got]
        assert offsets == list(range(first_offset, first_offset + len(got))), \
            f"partition {p}: offsets not contiguous from {first_offset}: {offsets[:5]}...{offsets[-5:]}"
        reported = [stream.delivered[seq_of(r)] for r in got]
        assert reported == [(p, r.offset) for r in got], f"partition {p}: offsets differ from the delivery reports"
