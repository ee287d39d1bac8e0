"""Topic names and the Key_Shared selectors, as plain functions."""

from __future__ import annotations

import random

import pytest

from broker.topics.dispatch.key_selector import SLOTS, AutoSplitSelector, StickySelector
from common.errors import ConsumerAssignError, InvalidTopicName
from common.topic_names import parse_namespace, parse_topic


def test_short_names_expand_like_pulsar() -> None:
    assert str(parse_topic("my-topic")) == "persistent://public/default/my-topic"
    assert str(parse_topic("t/ns/x")) == "persistent://t/ns/x"
    assert str(parse_topic("persistent://t/ns/x")) == "persistent://t/ns/x"


def test_partition_suffix() -> None:
    name = parse_topic("persistent://t/ns/orders-partition-7")
    assert name.partition_index == 7
    assert str(name.base) == "persistent://t/ns/orders"
    assert str(name.base.partition(3)) == "persistent://t/ns/orders-partition-3"
    assert parse_topic("orders").partition_index == -1


@pytest.mark.parametrize("bad", ["", "a/b", "persistent://a/b", "persistent://a/b/c/d", "x://a/b/c",
                                 "non-persistent://a/b", "non-persistent://a/b/c d", "persistent://a//c",
                                 "sp ace", "a/b/c?",
                                 "x" * 600])
def test_invalid_names_are_typed_errors(bad: str) -> None:
    with pytest.raises(InvalidTopicName):
        parse_topic(bad)


def test_namespace() -> None:
    assert parse_namespace("public/default") == ("public", "default")
    with pytest.raises(InvalidTopicName):
        parse_namespace("public")


def test_auto_split_covers_every_slot_and_moves_few_on_join(seed: int) -> None:
    rng = random.Random(seed)
    selector: AutoSplitSelector[str] = AutoSplitSelector()
    for name in ("a", "b", "c"):
        selector.add(name, f"{name}-label")
    slots = [rng.randrange(SLOTS) for _ in range(2000)]
    before = {s: selector.select(s) for s in slots}
    assert set(before.values()) == {"a", "b", "c"}
    selector.add("d", "d-label")
    after = {s: selector.select(s) for s in slots}
    moved = [s for s in slots if before[s] != after[s]]
    assert all(after[s] == "d" for s in moved), "a join only moves slots to the newcomer"
    assert 0 < len(moved) < len(slots) * 0.5
    selector.remove("d")
    assert {s: selector.select(s) for s in slots} == before


def test_auto_split_empty_selects_nobody() -> None:
    assert AutoSplitSelector().select(5) is None


def test_sticky_ranges_route_and_refuse_overlap() -> None:
    selector: StickySelector[str] = StickySelector()
    selector.add("low", [(0, 999), (2000, 2999)])
    selector.add("high", [(1000, 1999)])
    assert selector.select(0) == "low" and selector.select(999) == "low"
    assert selector.select(1000) == "high" and selector.select(2500) == "low"
    assert selector.select(3000) is None
    with pytest.raises(ConsumerAssignError):
        selector.add("x", [(1500, 1600)])
    with pytest.raises(ConsumerAssignError):
        selector.add("x", [(2999, 3500)])
    with pytest.raises(ConsumerAssignError):
        selector.add("x", [(5, 3)])
    with pytest.raises(ConsumerAssignError):
        selector.add("x", [(70000, 70001)])
    with pytest.raises(ConsumerAssignError):
        selector.add("x", [(4000, 5000), (4500, 4600)])
    selector.remove("high")
    selector.add("x", [(1000, 1999)])
    assert selector.select(1500) == "x"
