"""Failover's choice of the active consumer, without a broker, against Pulsar's own rule.

GOLDEN was printed by `java -Dfile.encoding=UTF-8 tests/broker/topics/dispatch/golden/FailoverRing.java`,
which reproduces `AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer` and
Pulsar's `Murmur3_32Hash` (see that file for the Pulsar sources it follows). Each row is
(topic, partition index or -1, [(consumer name, priority level)] in arrival order, index of the
consumer Pulsar makes active); the comment names it. Regenerate by running the program again.
"""

from __future__ import annotations

import itertools

import pytest

from broker.topics.dispatch.single_active import choose_active, pick_active_index, ring_pick
from tests.support.pulsar_failover import murmur3_31, pulsar_failover_pick

GOLDEN = [
    ("persistent://public/default/t", -1,  # "solo"
     [("solo", 0)], 0),
    ("persistent://public/default/t", -1,  # "b"
     [("a", 0), ("b", 0)], 1),
    ("persistent://public/default/t", -1,  # "b-second"
     [("a-first", 0), ("b-second", 0)], 1),
    ("persistent://public/default/t", -1,  # "gamma"
     [("gamma", 0), ("alpha", 0), ("beta", 0)], 0),
    ("persistent://public/default/t", -1,  # "c1"
     [("c0", 0), ("c1", 0), ("c2", 0), ("c3", 0)], 1),
    ("persistent://public/default/t", -1,  # "consumer-1"
     [("consumer-5", 0), ("consumer-3", 0), ("consumer-1", 0), ("consumer-4", 0), ("consumer-2", 0)], 2),
    ("persistent://public/default/orders", -1,  # "solo"
     [("solo", 0)], 0),
    ("persistent://public/default/orders", -1,  # "a"
     [("a", 0), ("b", 0)], 0),
    ("persistent://public/default/orders", -1,  # "a-first"
     [("a-first", 0), ("b-second", 0)], 0),
    ("persistent://public/default/orders", -1,  # "alpha"
     [("gamma", 0), ("alpha", 0), ("beta", 0)], 1),
    ("persistent://public/default/orders", -1,  # "c3"
     [("c0", 0), ("c1", 0), ("c2", 0), ("c3", 0)], 3),
    ("persistent://public/default/orders", -1,  # "consumer-4"
     [("consumer-5", 0), ("consumer-3", 0), ("consumer-1", 0), ("consumer-4", 0), ("consumer-2", 0)], 3),
    ("persistent://public/default/payments-eu", -1,  # "solo"
     [("solo", 0)], 0),
    ("persistent://public/default/payments-eu", -1,  # "b"
     [("a", 0), ("b", 0)], 1),
    ("persistent://public/default/payments-eu", -1,  # "b-second"
     [("a-first", 0), ("b-second", 0)], 1),
    ("persistent://public/default/payments-eu", -1,  # "gamma"
     [("gamma", 0), ("alpha", 0), ("beta", 0)], 0),
    ("persistent://public/default/payments-eu", -1,  # "c3"
     [("c0", 0), ("c1", 0), ("c2", 0), ("c3", 0)], 3),
    ("persistent://public/default/payments-eu", -1,  # "consumer-2"
     [("consumer-5", 0), ("consumer-3", 0), ("consumer-1", 0), ("consumer-4", 0), ("consumer-2", 0)], 4),
    ("persistent://tenant-a/ns1/events", -1,  # "solo"
     [("solo", 0)], 0),
    ("persistent://tenant-a/ns1/events", -1,  # "b"
     [("a", 0), ("b", 0)], 1),
    ("persistent://tenant-a/ns1/events", -1,  # "b-second"
     [("a-first", 0), ("b-second", 0)], 1),
    ("persistent://tenant-a/ns1/events", -1,  # "beta"
     [("gamma", 0), ("alpha", 0), ("beta", 0)], 2),
    ("persistent://tenant-a/ns1/events", -1,  # "c3"
     [("c0", 0), ("c1", 0), ("c2", 0), ("c3", 0)], 3),
    ("persistent://tenant-a/ns1/events", -1,  # "consumer-3"
     [("consumer-5", 0), ("consumer-3", 0), ("consumer-1", 0), ("consumer-4", 0), ("consumer-2", 0)], 1),
    ("non-persistent://public/default/ticks", -1,  # "solo"
     [("solo", 0)], 0),
    ("non-persistent://public/default/ticks", -1,  # "b"
     [("a", 0), ("b", 0)], 1),
    ("non-persistent://public/default/ticks", -1,  # "b-second"
     [("a-first", 0), ("b-second", 0)], 1),
    ("non-persistent://public/default/ticks", -1,  # "gamma"
     [("gamma", 0), ("alpha", 0), ("beta", 0)], 0),
    ("non-persistent://public/default/ticks", -1,  # "c1"
     [("c0", 0), ("c1", 0), ("c2", 0), ("c3", 0)], 1),
    ("non-persistent://public/default/ticks", -1,  # "consumer-3"
     [("consumer-5", 0), ("consumer-3", 0), ("consumer-1", 0), ("consumer-4", 0), ("consumer-2", 0)], 1),
    ("persistent://public/default/my-topic-partition-3", -1,  # "solo"
     [("solo", 0)], 0),
    ("persistent://public/default/my-topic-partition-3", -1,  # "a"
     [("a", 0), ("b", 0)], 0),
    ("persistent://public/default/my-topic-partition-3", -1,  # "b-second"
     [("a-first", 0), ("b-second", 0)], 1),
    ("persistent://public/default/my-topic-partition-3", -1,  # "alpha"
     [("gamma", 0), ("alpha", 0), ("beta", 0)], 1),
    ("persistent://public/default/my-topic-partition-3", -1,  # "c3"
     [("c0", 0), ("c1", 0), ("c2", 0), ("c3", 0)], 3),
    ("persistent://public/default/my-topic-partition-3", -1,  # "consumer-4"
     [("consumer-5", 0), ("consumer-3", 0), ("consumer-1", 0), ("consumer-4", 0), ("consumer-2", 0)], 3),
    ("persistent://public/default/spread-0", -1,  # "x"
     [("x", 0), ("y", 0), ("z", 0)], 0),
    ("persistent://public/default/spread-1", -1,  # "z"
     [("x", 0), ("y", 0), ("z", 0)], 2),
    ("persistent://public/default/spread-2", -1,  # "y"
     [("x", 0), ("y", 0), ("z", 0)], 1),
    ("persistent://public/default/spread-3", -1,  # "z"
     [("x", 0), ("y", 0), ("z", 0)], 2),
    ("persistent://public/default/spread-4", -1,  # "x"
     [("x", 0), ("y", 0), ("z", 0)], 0),
    ("persistent://public/default/spread-5", -1,  # "y"
     [("x", 0), ("y", 0), ("z", 0)], 1),
    ("persistent://public/default/spread-6", -1,  # "x"
     [("x", 0), ("y", 0), ("z", 0)], 0),
    ("persistent://public/default/spread-7", -1,  # "z"
     [("x", 0), ("y", 0), ("z", 0)], 2),
    ("persistent://public/default/prio", -1,  # "z"
     [("a", 1), ("b", 1), ("z", 0)], 2),
    ("persistent://public/default/prio", -1,  # "a"
     [("a", 0), ("b", 1), ("c", 0), ("d", 2)], 0),
    ("persistent://public/default/prio", -1,  # "q"
     [("p", 3), ("q", 2), ("r", 2)], 1),
    ("persistent://public/default/parted-partition-0", 0,  # "a"
     [("b", 0), ("a", 0), ("c", 5)], 1),
    ("persistent://public/default/parted-partition-1", 1,  # "b"
     [("b", 0), ("a", 0), ("c", 5)], 0),
    ("persistent://public/default/parted-partition-2", 2,  # "a"
     [("b", 0), ("a", 0), ("c", 5)], 1),
    ("persistent://public/default/parted-partition-3", 3,  # "b"
     [("b", 0), ("a", 0), ("c", 5)], 0),
    ("persistent://public/default/parted-partition-4", 4,  # "a"
     [("b", 0), ("a", 0), ("c", 5)], 1),
    ("persistent://public/default/parted-partition-7", 7,  # "d"
     [("d", 1), ("c", 1), ("b", 1), ("a", 1)], 0),
    ("persistent://public/default/same", -1,  # "same"
     [("same", 0), ("same", 0)], 1),
    ("persistent://public/default/same", -1,  # "same"
     [("same", 0), ("other", 0), ("same", 0)], 2),
    ("persistent://public/default/same-partition-1", 1,  # "same"
     [("same", 0), ("same", 0), ("other", 0)], 0),
    ("persistent://public/default/uni-partition-0", 0,  # "\U0001f600"
     [("\ufffd", 0), ("\U0001f600", 0)], 1),
    ("persistent://public/default/uni-partition-1", 1,  # "\ufffd"
     [("\ufffd", 0), ("\U0001f600", 0)], 0),
    ("persistent://public/default/uni-partition-1", 1,  # "\U00010000y"
     [("\ue000x", 0), ("\U00010000y", 0), ("zz", 0)], 1),
    ("persistent://public/default/uni", -1,  # "\u00fcber"
     [("caf\u00e9", 0), ("cafe", 0), ("\u00fcber", 0)], 2),
    ("persistent://public/default/\u00fcnic\u00f6de", -1,  # "n1"
     [("n1", 0), ("n2", 0), ("n3", 0)], 0),
]


class _C:
    def __init__(self, name: str, priority: int = 0) -> None:
        self.name = name
        self.priority = priority

    def __repr__(self) -> str:
        return f"_C({self.name!r}, {self.priority})"


def _sorted(consumers: list[_C]) -> list[_C]:
    return sorted(consumers, key=lambda c: (c.priority, c.name))


def _strata_pick(topic: str, partition: int, arrivals: list[_C], listed: list[_C]) -> _C | None:
    """Strata's choice when the consumers arrived in `arrivals` order and are held as `listed`."""
    return choose_active(listed, {c: i for i, c in enumerate(arrivals)}, True, topic, partition)


@pytest.mark.parametrize("topic, partition, consumers, chosen", GOLDEN)
def test_strata_picks_the_consumer_pulsar_picks(topic: str, partition: int,
                                                consumers: list[tuple[str, int]], chosen: int) -> None:
    arrivals = [_C(name, priority) for name, priority in consumers]
    assert _strata_pick(topic, partition, arrivals, arrivals) is arrivals[chosen]


@pytest.mark.parametrize("topic, partition, consumers, chosen", GOLDEN)
def test_the_test_oracle_picks_the_consumer_pulsar_picks(topic: str, partition: int,
                                                        consumers: list[tuple[str, int]], chosen: int) -> None:
    """tests.support.pulsar_failover (used by the acceptance tests) agrees with the Java program."""
    assert pulsar_failover_pick(topic, consumers, partition) == chosen


@pytest.mark.parametrize("topic, partition, consumers, chosen", GOLDEN)
def test_the_choice_does_not_depend_on_how_consumers_are_listed_or_arrived(
        topic: str, partition: int, consumers: list[tuple[str, int]], chosen: int) -> None:
    """Any order of the dispatcher's list gives the same consumer; any arrival order gives the same
    name (arrival only breaks ties between equal names)."""
    arrivals = [_C(name, priority) for name, priority in consumers]
    for listed in itertools.permutations(arrivals):
        assert _strata_pick(topic, partition, arrivals, list(listed)) is arrivals[chosen], listed
    for arrived in itertools.permutations(arrivals):
        picked = _strata_pick(topic, partition, list(arrived), arrivals)
        assert picked is not None and picked.name == consumers[chosen][0], arrived


def test_ring_pick_depends_only_on_the_set_of_names() -> None:
    topic = "persistent://public/default/t"
    names = ["alpha", "beta", "delta", "gamma"]
    chosen = names[ring_pick(topic, names)]
    for order in itertools.permutations(names):
        assert order[ring_pick(topic, list(order))] == chosen, order
    assert ring_pick(topic, ["solo"]) == 0


def test_the_oracle_murmur3_matches_the_reference_vectors() -> None:
    """Same vectors as test_murmur3.py (MurmurHash3_x86_32, seed 0), sign bit cleared."""
    for data, expected in ((b"", 0x0), (b"a", 0x3C2569B2), (b"abc", 0xB3DD93FA), (b"abcd", 0x43ED676A),
                           (b"The quick brown fox jumps over the lazy dog", 0x2E4FF723),
                           (bytes(range(256)), 0xE40A0E56), ("日本語".encode(), 0xA5A47297)):
        assert murmur3_31(data) == expected & 0x7FFFFFFF, data


def test_a_newcomer_takes_over_only_about_one_time_in_n() -> None:
    """Over many topics, adding a third consumer moves roughly a third of the topics, and only to
    the newcomer; the rest keep their active consumer (no needless switches)."""
    before, after = ["a", "b"], ["a", "b", "c"]
    moved = 0
    topics = [f"persistent://public/default/t{i}" for i in range(300)]
    for topic in topics:
        old = before[ring_pick(topic, before)]
        new = after[ring_pick(topic, after)]
        if new != old:
            assert new == "c"
            moved += 1
    assert 50 <= moved <= 150, moved


def test_only_the_highest_priority_group_is_eligible() -> None:
    consumers = _sorted([_C("z", 0), _C("a", 1), _C("b", 1)])
    for topic in ("persistent://public/default/x", "persistent://public/default/y"):
        assert consumers[pick_active_index(topic, -1, consumers)].name == "z"
    assert [consumers[pick_active_index("p", i, consumers)].name for i in range(3)] == ["z", "z", "z"]


def test_partitions_spread_by_index_mod_eligible() -> None:
    consumers = _sorted([_C("b"), _C("a"), _C("c", 5)])
    assert [consumers[pick_active_index("p", i, consumers)].name for i in range(4)] == ["a", "b", "a", "b"]
