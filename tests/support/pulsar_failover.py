"""Pulsar's Failover choice of the active consumer, written again for tests (no product import).

An oracle for tests that need to know which consumer Pulsar would make active, e.g. with a topic
name that only exists at run time. It follows `AbstractDispatcherSingleActiveConsumer.
pickAndScheduleActiveConsumer` (apache/pulsar, pulsar-broker) with
`activeConsumerFailoverConsistentHashing` off (the default), step for step as
`tests/broker/topics/dispatch/golden/FailoverRing.java` does, and
`tests/broker/topics/dispatch/test_failover_ring.py` checks it against that program's pinned output:
- a stable sort of the consumers (in arrival order) by (priority level, name), names compared as
  Java's `String.compareTo` does, by UTF-16 code unit;
- if priorities differ, only the leading run of the highest priority (lowest level) is eligible;
- a partition of a partitioned topic: `eligible[partition_index % len(eligible)]`;
- otherwise a ring: 100 points per eligible consumer, `murmur3(name + str(j)) & 0x7FFFFFFF`, a
  later consumer overwriting a colliding point; the topic takes the first point at or after
  `murmur3(topic) & 0x7FFFFFFF`, wrapping to the first point.
Murmur3 is written out here too (MurmurHash3_x86_32, seed 0), so nothing of Strata is reused.
"""

from __future__ import annotations

import bisect

_M32 = 0xFFFFFFFF
REPLICAS = 100


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k(k: int) -> int:
    k = (k * 0xCC9E2D51) & _M32
    return (_rotl(k, 15) * 0x1B873593) & _M32


def murmur3_31(data: bytes) -> int:
    """Pulsar's Murmur3_32Hash.makeHash: MurmurHash3_x86_32, seed 0, sign bit cleared."""
    h = 0
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        h ^= _mix_k(int.from_bytes(data[i:i + 4], "little"))
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & _M32
    h ^= _mix_k(int.from_bytes(data[whole:], "little"))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h & 0x7FFFFFFF


def java_order(name: str) -> bytes:
    """A sort key that orders strings as Java's String.compareTo (by UTF-16 code unit)."""
    return name.encode("utf-16-be", "surrogatepass")


def pulsar_failover_pick(topic: str, consumers: list[tuple[str, int]], partition_index: int = -1) -> int:
    """Index into `consumers` ((name, priority level) in arrival order) of the one Pulsar makes
    active on `topic` (`partition_index` -1: not a partition of a partitioned topic)."""
    order = sorted(range(len(consumers)), key=lambda i: (consumers[i][1], java_order(consumers[i][0])))
    top = consumers[order[0]][1]
    eligible = [i for i in order if consumers[i][1] == top]
    if partition_index >= 0:
        return eligible[partition_index % len(eligible)]
    ring: dict[int, int] = {}
    for arrival in eligible:
        for j in range(REPLICAS):
            ring[murmur3_31(f"{consumers[arrival][0]}{j}".encode())] = arrival
    points = sorted(ring)
    at = bisect.bisect_left(points, murmur3_31(topic.encode()))
    return ring[points[at % len(points)]]


def pulsar_failover_active(topic: str, names: list[str]) -> str:
    """The name Pulsar makes active among equal-priority Failover consumers on a
    non-partitioned `topic`."""
    return names[pulsar_failover_pick(topic, [(name, 0) for name in names])]
