"""The workloads, the same for every system, in the style of OpenMessaging Benchmark.

- `produce-1x1`: max-rate produce of 1 KiB messages to 1 topic with 1 partition; these messages
  are the backlog the next workload reads.
- `consume-backlog`: catch-up read of that backlog (1M messages at full scale) from the start.
- `produce-1x16`: max-rate produce to 1 topic with 16 partitions (peers: 16 streams/subjects).
- `e2e-5k`: end-to-end latency (send → consumer callback, the consumer in a process of its own,
  one machine clock) at a fixed 5,000 msg/s; p50/p99/p99.9. The same run's publish latency
  (send → the system's ack, each message counted) goes in the row's `extra` as
  `publish_p50_ms`/`publish_p99_ms`/`publish_p999_ms` for every driver that reports latency.
- `topics-1000`: 1,000 topics, each with one producer and one consumer at 1 msg/s; the servers'
  RSS growth and CPU per topic.

Each workload returns one `Row`. Latencies of produce rows are publish-ack latencies (batch sent →
batch acknowledged, each message counted); of `e2e-5k` end-to-end latencies. Server CPU and RSS
cover all of the system's server processes (bench/procstat.py) over the measured interval.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field

from bench.consumer_proc import ConsumerProcess
from bench.driver import Driver, Payloads
from bench.procstat import ProcSampler

MESSAGE_BYTES = 1024
E2E_RATE_PER_S = 5000
TOPIC_RATE_PER_S = 1.0
PARTITIONS = 16
WORKLOADS = ("produce-1x1", "consume-backlog", "produce-1x16", "e2e-5k", "topics-1000")


@dataclass
class Scale:
    """Sizes of one run; `factor` 1.0 is the full run, --quick is 0.1."""
    factor: float = 1.0

    @property
    def backlog(self) -> int:
        return max(2_000, int(1_000_000 * self.factor))

    @property
    def e2e_s(self) -> float:
        return max(2.0, 30.0 * self.factor)

    @property
    def topics(self) -> int:
        return max(10, int(1000 * self.factor))

    @property
    def topics_s(self) -> float:
        return max(3.0, 20.0 * self.factor)


@dataclass
class Row:
    system: str
    workload: str
    messages: int = 0
    seconds: float = 0.0
    msgs_per_s: float = 0.0
    mb_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    latency_kind: str = ""
    server_rss_mb: float = 0.0
    server_cpu_us_per_msg: float | None = None
    extra: dict = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


PERCENTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def weighted_ms(latencies: list[tuple[float, int]]) -> list[float]:
    """(seconds, messages) pairs → one sorted value in ms per message."""
    out: list[float] = []
    for seconds, count in latencies:
        out.extend([seconds * 1000.0] * count)
    out.sort()
    return out


def fill(row: Row, messages: int, seconds: float, usage, lat_ms: list[float], kind: str) -> Row:
    row.messages, row.seconds = messages, seconds
    row.msgs_per_s = messages / seconds if seconds > 0 else 0.0
    row.mb_per_s = row.msgs_per_s * MESSAGE_BYTES / 1e6
    row.p50_ms, row.p99_ms, row.p999_ms = (percentile(lat_ms, q) for q in (0.5, 0.99, 0.999))
    row.latency_kind = kind
    row.server_rss_mb = usage.rss_bytes_peak / 1e6
    row.server_cpu_us_per_msg = usage.cpu_s * 1e6 / messages if messages else None
    return row


def deadline_for(messages: int) -> float:
    return time.monotonic() + 60.0 + messages / 4000.0


async def produce_max(driver: Driver, sampler: ProcSampler, name: str, topics: list[str],
                      total: int, partitioned_as: str | None = None) -> Row:
    await driver.create_topics(topics, partitioned_as=partitioned_as)
    n_per = total // len(topics)
    sampler.begin()
    start = time.perf_counter()
    lat = await driver.produce(topics, n_per, Payloads(MESSAGE_BYTES), deadline_for(total))
    seconds = time.perf_counter() - start
    usage = sampler.end()
    acked = sum(count for _, count in lat)
    lat_ms = weighted_ms(lat) if driver.reports_latency else []
    row = fill(Row(driver.name, name), acked, seconds, usage, lat_ms, "publish ack" if lat_ms else "")
    row.extra.update(sent=n_per * len(topics), **driver.last_extra)
    return row


async def consume_backlog(driver: Driver, sampler: ProcSampler, topic: str, total: int) -> Row:
    sampler.begin()
    start = time.perf_counter()
    got = await driver.consume([topic], total, deadline_for(total))
    seconds = time.perf_counter() - start
    usage = sampler.end()
    row = fill(Row(driver.name, "consume-backlog"), got, seconds, usage, [], "")
    row.extra["expected"] = total
    return row


async def e2e_latency(driver: Driver, sampler: ProcSampler, topic: str, duration_s: float) -> Row:
    """The consumer runs in its own process (bench/consumer_proc.py), the paced producer here."""
    total = int(E2E_RATE_PER_S * duration_s)
    await driver.create_topics([topic])
    deadline = deadline_for(total) + duration_s
    consumer = ConsumerProcess(driver, topic, total, deadline)
    try:
        await consumer.ready(60)
        sampler.begin()
        start = time.perf_counter()
        publish = await driver.produce([topic], total, Payloads(MESSAGE_BYTES, stamped=True), deadline,
                                       E2E_RATE_PER_S)
        got, lat_ms = await consumer.result()
    finally:
        consumer.close()
    seconds = time.perf_counter() - start
    usage = sampler.end()
    lat_ms.sort()
    row = fill(Row(driver.name, "e2e-5k"), got, seconds, usage, lat_ms, "end-to-end")
    if driver.reports_latency:
        publish_ms = weighted_ms(publish)
        row.extra.update({f"publish_{name}_ms": percentile(publish_ms, q) for name, q in PERCENTILES})
    return row


async def _ready(consumer: asyncio.Future, ready: asyncio.Event, timeout_s: float) -> None:
    """Wait until the consumers are open; a consumer task that failed first raises its error."""
    waiter = asyncio.ensure_future(ready.wait())
    try:
        await asyncio.wait({consumer, waiter}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if consumer.done():
        consumer.result()  # raises the consumer's error
    if not ready.is_set():
        raise TimeoutError(f"consumers not open within {timeout_s:.0f}s")


async def _cancel(task: asyncio.Future) -> None:
    if not task.done():
        task.cancel()
    try:
        await task
    except BaseException:  # its outcome was already reported, or it was cancelled here
        pass


async def many_topics(driver: Driver, sampler: ProcSampler, prefix: str, count: int, duration_s: float) -> Row:
    topics = [f"{prefix}-{i}" for i in range(count)]
    baseline_rss = sampler.total_rss_bytes()
    setup_start = time.perf_counter()
    await driver.create_topics(topics)
    n_per = max(1, int(TOPIC_RATE_PER_S * duration_s))
    deadline = deadline_for(n_per * count) + duration_s + count * 0.2
    ready = asyncio.Event()
    consumer = asyncio.ensure_future(driver.consume(topics, n_per, deadline, None, ready))
    try:
        await _ready(consumer, ready, 60 + count * 0.2)
        producers = [await driver.open_producer(t) for t in topics]  # setup, not the timed window
        setup_s = time.perf_counter() - setup_start
        deadline += setup_s
        sampler.begin()
        start = time.perf_counter()
        lat = await driver.produce(topics, n_per, Payloads(MESSAGE_BYTES), deadline, TOPIC_RATE_PER_S * count,
                                   producers=producers)
        got = await consumer
    finally:
        await _cancel(consumer)
    seconds = time.perf_counter() - start
    usage = sampler.end()
    row = fill(Row(driver.name, "topics-1000"), got, seconds, usage, weighted_ms(lat), "publish ack")
    grown = max(0, usage.rss_bytes_peak - baseline_rss)
    row.extra.update(topics=count, setup_s=round(setup_s, 2), rss_kb_per_topic=grown / 1024 / count,
                     cpu_ms_per_s_per_topic=usage.cpu_s * 1000 / seconds / count,
                     baseline_rss_mb=baseline_rss / 1e6, expected=n_per * count)
    return row


async def run_all(driver: Driver, sampler: ProcSampler, scale: Scale, only: set[str] | None = None) -> list[Row]:
    """Every workload the driver supports, in order; a failing workload becomes a row with `error`."""
    wanted = [w for w in WORKLOADS if (only is None or w in only)
              and (driver.workloads is None or w in driver.workloads)]
    tag = f"b{int(time.time() * 1000) % 10_000_000}"
    backlog_topic = f"{tag}-p1"
    p16 = f"{tag}-p16"
    jobs = {
        "produce-1x1": lambda: produce_max(driver, sampler, "produce-1x1", [backlog_topic], scale.backlog),
        "consume-backlog": lambda: consume_backlog(driver, sampler, backlog_topic, scale.backlog),
        "produce-1x16": lambda: produce_max(driver, sampler, "produce-1x16",
                                            [f"{p16}-partition-{i}" for i in range(PARTITIONS)],
                                            scale.backlog, partitioned_as=p16),
        "e2e-5k": lambda: e2e_latency(driver, sampler, f"{tag}-e2e", scale.e2e_s),
        "topics-1000": lambda: many_topics(driver, sampler, f"{tag}-t", scale.topics, scale.topics_s),
    }
    rows = []
    for name in wanted:
        if name == "consume-backlog" and rows and rows[-1].workload == "produce-1x1" and rows[-1].error:
            rows.append(Row(driver.name, name, error="no backlog: produce-1x1 failed"))
            continue
        try:
            rows.append(await jobs[name]())
        except Exception as exc:  # one failed workload must not hide the others' numbers
            rows.append(Row(driver.name, name, error=f"{type(exc).__name__}: {exc}"[:500]))
        print(f"  {driver.name:28s} {name:16s} {_brief(rows[-1])}", flush=True)
    return rows


def _brief(row: Row) -> str:
    if row.error:
        return f"ERROR {row.error[:200]}"
    lat = "" if row.p99_ms is None else f" p50 {row.p50_ms:.2f} p99 {row.p99_ms:.2f} ms"
    if row.extra.get("publish_p99_ms") is not None:
        lat += f" (publish p50 {row.extra['publish_p50_ms']:.2f} p99 {row.extra['publish_p99_ms']:.2f} ms)"
    return f"{row.msgs_per_s:10,.0f} msg/s{lat} cpu {row.server_cpu_us_per_msg or 0:.1f} us/msg"
