"""The workload of a chaos run, decided once from a seed: topics, producers, subscriptions, readers.

    plan = WorkloadPlan.build(seed=7, size=1)          # the same seed and size: the same plan
    for proc, argv in plan.commands("pulsar://127.0.0.1:6650", out_dir):
        subprocess.Popen(argv, env=os.environ)         # python -m chaos.workload <role> ...
    proc, argv = plan.final_command(service_url, out_dir)   # after the run: the read-back

Every process rebuilds the plan from `--seed/--size/--namespace/--rate-per-s` and takes its own
part by its process name, so nothing but those four values crosses a process boundary.

Size 1 (the default) is three topics: `plain-0` (not keyed), `keyed-0` (keys from KEYS) and
`part-0` (2 or 3 partitions, keyed or not by the seed); each size step adds three more. Each topic
has 1 or 2 producers (the first producer of every `plain-*` topic batches: deduplication is by the
batch's highest sequence id, so a batch resent after a reconnect must be dropped whole), and one
subscription of each type: Exclusive (1 consumer), Failover, Shared and Key_Shared (2 each).
Exclusive and Failover ack cumulatively on alternate topics (Pulsar allows cumulative acks only
there), the rest individually. Only individually acking subscriptions nack: a nack on a
cumulative subscription is later covered by the next cumulative ack, which would make "redelivered
after ack" ambiguous for the checker. Every partition has a reader from the earliest message.

Processes: `producer-<topic>` per topic, `consumer-<type>` per subscription type (one thread per
consumer), one `reader`, and `final` after the run. The total send rate is `rate_per_s` (240 by
default: enough to roll ledgers every few seconds with BROKER_ENV, small enough for 2 cores).

What must hold: `build` is a pure function of its arguments (its only randomness is
random.Random(seed)); every subscription type and both ack modes appear at every size; a
cumulative ack mode only on Exclusive or Failover; names are unique (a producer name across the
whole plan, a consumer name across the plan, a subscription name within its topic).
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.invariant import invariant

DEFAULT_NAMESPACE = "chaos/ns"
DEFAULT_RATE_PER_S = 240.0
KEYS = tuple(f"k{i}" for i in range(8))          # the key space of keyed producers
SUBTYPES = ("Exclusive", "Failover", "Shared", "Key_Shared")
CUMULATIVE_SUBTYPES = ("Exclusive", "Failover")   # where Pulsar allows acknowledge_cumulative
INDIVIDUAL, CUMULATIVE = "individual", "cumulative"
PENDING_SENDS_PER_PRODUCER_MAX = 500              # in-flight sends per producer (about 10 s of its rate)
NACK_REDELIVERY_DELAY_MS = 1_000
DRAIN_S = 30.0                                    # producers wait this long for pending sends at the end
FINAL_TIMEOUT_S = 120.0                           # the whole final read-back, every topic


@dataclass(frozen=True)
class TopicPlan:
    topic: str          # full base name, persistent://tenant/ns/name
    partitions: int     # 0: a plain (non-partitioned) topic
    keyed: bool         # its producers send with keys from KEYS

    @property
    def short(self) -> str:
        return self.topic.rsplit("/", 1)[-1]

    def partition_topics(self) -> tuple[str, ...]:
        """The topics that hold messages: the topic itself, or each `<topic>-partition-<i>`."""
        if self.partitions == 0:
            return (self.topic,)
        return tuple(f"{self.topic}-partition-{i}" for i in range(self.partitions))


@dataclass(frozen=True)
class ProducerPlan:
    name: str           # the producer name (deduplication is per name): unique in the plan
    topic: str          # base topic
    keyed: bool
    batching: bool
    rate_per_s: float
    pending_max: int    # sends in flight at once; over it the producer waits (skips its slot)
    proc: str


@dataclass(frozen=True)
class SubscriptionPlan:
    topic: str                  # base topic
    name: str                   # unique within the topic
    subtype: str                # one of SUBTYPES
    ack_mode: str               # INDIVIDUAL or CUMULATIVE
    cumulative_every: int       # cumulative mode: ack cumulatively every Nth delivery (1 = each)
    nack_probability: float     # per delivery; 0 for cumulative subscriptions
    reopen_probability: float   # per delivery: close the consumer and subscribe again
    consumers: tuple[str, ...]  # consumer names, one thread each
    proc: str


@dataclass(frozen=True)
class ReaderPlan:
    topic: str          # one partition's full name (or a plain topic)
    name: str
    proc: str


@dataclass(frozen=True)
class WorkloadPlan:
    seed: int
    size: int
    namespace: str
    topics: tuple[TopicPlan, ...]
    producers: tuple[ProducerPlan, ...]
    subscriptions: tuple[SubscriptionPlan, ...]
    readers: tuple[ReaderPlan, ...]
    rate_per_s: float                     # total sends per second over every producer
    keys: tuple[str, ...] = KEYS
    nack_redelivery_delay_ms: int = NACK_REDELIVERY_DELAY_MS

    @classmethod
    def build(cls, seed: int, size: int = 1, namespace: str = DEFAULT_NAMESPACE,
              rate_per_s: float = DEFAULT_RATE_PER_S) -> WorkloadPlan:
        invariant(size >= 1, "a workload has at least one group of topics", size=size)
        invariant(namespace.count("/") == 1, "namespace is tenant/ns", namespace=namespace)
        invariant(rate_per_s > 0, "a positive send rate", rate_per_s=rate_per_s)
        rng = random.Random(seed)
        topics = tuple(t for i in range(size) for t in _topic_group(rng, namespace, i))
        producer_counts = [rng.choice((1, 2)) for _ in topics]
        rate_each = rate_per_s / sum(producer_counts)
        producers = tuple(
            ProducerPlan(f"{t.short}-p{j}", t.topic, t.keyed, batching=(j == 0 and t.short.startswith("plain-")),
                         rate_per_s=rate_each, pending_max=PENDING_SENDS_PER_PRODUCER_MAX,
                         proc=f"producer-{t.short}")
            for t, count in zip(topics, producer_counts) for j in range(count))
        subscriptions = tuple(s for i, t in enumerate(topics) for s in _subscriptions(rng, t, i))
        readers = tuple(ReaderPlan(p, f"reader-{p.rsplit('/', 1)[-1]}", "reader")
                        for t in topics for p in t.partition_topics())
        plan = cls(seed, size, namespace, topics, producers, subscriptions, readers, rate_per_s)
        plan.check()
        return plan

    def check(self) -> None:
        """The plan's promises (module docstring); raises InvariantError when one fails."""
        invariant({s.subtype for s in self.subscriptions} == set(SUBTYPES), "every subscription type")
        invariant({s.ack_mode for s in self.subscriptions} == {INDIVIDUAL, CUMULATIVE}, "both ack modes")
        for s in self.subscriptions:
            invariant(s.ack_mode == INDIVIDUAL or s.subtype in CUMULATIVE_SUBTYPES,
                      "cumulative acks only on Exclusive or Failover", sub=s.name, subtype=s.subtype)
            invariant(s.ack_mode == INDIVIDUAL or s.nack_probability == 0, "no nacks when acking cumulatively")
        names = [p.name for p in self.producers]
        invariant(len(names) == len(set(names)), "producer names are unique", names=names)
        consumers = [c for s in self.subscriptions for c in s.consumers]
        invariant(len(consumers) == len(set(consumers)), "consumer names are unique")
        subs = [(s.topic, s.name) for s in self.subscriptions]
        invariant(len(subs) == len(set(subs)), "subscription names are unique within a topic")

    def topic(self, base: str) -> TopicPlan:
        return next(t for t in self.topics if t.topic == base)

    def procs(self) -> dict[str, str]:
        """Every process the runner launches during the run: name -> role (`final` excluded)."""
        procs = {p.proc: "producer" for p in self.producers}
        procs.update({s.proc: "consumer" for s in self.subscriptions})
        procs.update({r.proc: "reader" for r in self.readers})
        return procs

    def argv(self, role: str, proc: str, service_url: str, out_dir: str | Path, *extra: str) -> list[str]:
        """The command line of one process of this plan."""
        return [sys.executable, "-m", "chaos.workload", role, "--name", proc, "--seed", str(self.seed),
                "--size", str(self.size), "--namespace", self.namespace, "--rate-per-s", repr(self.rate_per_s),
                "--service-url", service_url,
                "--out", str(out_dir), *extra]

    def commands(self, service_url: str, out_dir: str | Path,
                 *, drain_s: float = DRAIN_S) -> list[tuple[str, list[str]]]:
        """(process name, argv) of every process to run during the run, producers first."""
        commands = []
        for proc, role in self.procs().items():
            extra = ("--drain-s", str(drain_s)) if role == "producer" else ()
            commands.append((proc, self.argv(role, proc, service_url, out_dir, *extra)))
        return commands

    def final_command(self, service_url: str, out_dir: str | Path,
                      *, timeout_s: float = FINAL_TIMEOUT_S) -> tuple[str, list[str]]:
        """(process name, argv) of the final read-back, run once every other process exited."""
        return "final", self.argv("final", "final", service_url, out_dir, "--timeout-s", str(timeout_s))

    def topic_records(self) -> list[dict[str, Any]]:
        """The fields of one `topic` history record per topic (write each with op "topic")."""
        return [{"topic": t.topic, "partitions": t.partitions,
                 "subs": [[s.name, s.subtype] for s in self.subscriptions if s.topic == t.topic],
                 "acks": {s.name: s.ack_mode for s in self.subscriptions if s.topic == t.topic},
                 "keyed": t.keyed,
                 "producers": [p.name for p in self.producers if p.topic == t.topic]}
                for t in self.topics]


def _topic_group(rng: random.Random, namespace: str, i: int) -> tuple[TopicPlan, ...]:
    """Group `i`: a plain topic, a plain keyed one and a partitioned one."""
    base = f"persistent://{namespace}"
    partitions = rng.choice((2, 3))
    return (TopicPlan(f"{base}/plain-{i}", 0, keyed=False), TopicPlan(f"{base}/keyed-{i}", 0, keyed=True),
            TopicPlan(f"{base}/part-{i}", partitions, keyed=rng.random() < 0.7))


def _subscriptions(rng: random.Random, topic: TopicPlan, index: int) -> list[SubscriptionPlan]:
    """One subscription of each type on `topic`; Exclusive and Failover alternate the ack modes."""
    cumulative_first = (index + rng.randrange(2)) % 2 == 0
    subs = []
    for subtype in SUBTYPES:
        kind = subtype.lower().replace("_", "-")
        if subtype in CUMULATIVE_SUBTYPES:
            cumulative = cumulative_first == (subtype == "Exclusive")
        else:
            cumulative = False
        count = 1 if subtype == "Exclusive" else 2
        subs.append(SubscriptionPlan(
            topic.topic, f"sub-{kind}", subtype, CUMULATIVE if cumulative else INDIVIDUAL,
            cumulative_every=rng.randint(1, 10) if cumulative else 1,
            nack_probability=0.0 if cumulative else round(rng.uniform(0.02, 0.08), 3),
            reopen_probability=round(rng.uniform(0.0005, 0.002), 5),
            consumers=tuple(f"{topic.short}-{kind}-c{k}" for k in range(count)),
            proc=f"consumer-{kind}"))
    return subs
