"""Failover's choice of the active consumer (Pulsar 3.x rule), without a broker."""

from __future__ import annotations

from broker.topics.dispatch.single_active import pick_active_index, ring_pick


class _C:
    def __init__(self, name: str, priority: int = 0) -> None:
        self.name = name
        self.priority = priority


def _sorted(consumers: list[_C]) -> list[_C]:
    return sorted(consumers, key=lambda c: (c.priority, c.name))


def test_ring_choice_depends_only_on_the_set_of_names() -> None:
    names = ["alpha", "beta", "gamma"]
    topic = "persistent://public/default/t"
    assert names[ring_pick(topic, names)] == names[ring_pick(topic, names)]
    assert 0 <= ring_pick(topic, ["solo"]) == 0


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
