"""Bundle math against Pulsar's facts: 4 equal bundles, CRC32 of the full topic name, the
0xLLLLLLLL_0xHHHHHHHH names, range_equally_divide, and typed errors for bad ranges and counts."""

from __future__ import annotations

import random
import zlib

import pytest

from broker.records.bundles import (
    BUNDLES_MAX,
    HASH_MAX,
    BundleRange,
    NamespaceBundles,
    equal_boundaries,
    parse_bundle,
    topic_hash,
)
from common.errors import InvalidBundle


def test_four_equal_bundles_as_pulsar_cuts_them() -> None:
    b = NamespaceBundles("public", "default", tuple(equal_boundaries(4)))
    assert b.to_json() == {"boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
                           "numBundles": 4}
    assert [r.key for r in b.ranges] == ["0x00000000_0x40000000", "0x40000000_0x80000000",
                                         "0x80000000_0xc0000000", "0xc0000000_0xffffffff"]


def test_topic_hash_is_crc32_of_the_full_name_and_every_hash_has_one_bundle(seed: int) -> None:
    name = "persistent://public/default/orders-partition-3"
    assert topic_hash(name) == zlib.crc32(name.encode()) & 0xFFFFFFFF
    b = NamespaceBundles("public", "default", tuple(equal_boundaries(8)))
    rng = random.Random(seed)
    for h in [0, HASH_MAX, 0x40000000, 0x3FFFFFFF] + [rng.randrange(HASH_MAX + 1) for _ in range(500)]:
        holders = [r for r in b.ranges if r.holds(h)]
        assert len(holders) == 1, f"hash {h:#x} (seed {seed})"
    assert b.find(name).holds(topic_hash(name))


def test_split_cuts_one_bundle_in_the_middle() -> None:
    b = NamespaceBundles("t", "ns", tuple(equal_boundaries(4)), version=3)
    split, (left, right) = b.split(b.ranges[1])
    assert (left.key, right.key) == ("0x40000000_0x60000000", "0x60000000_0x80000000")
    assert len(split.ranges) == 5 and split.version == 3
    with pytest.raises(InvalidBundle):
        b.split(BundleRange(0x10, 0x20))       # not a bundle of the namespace


@pytest.mark.parametrize("text", ["", "0x1", "0x10_0x10", "0x20_0x10", "10_20", "0xZZ_0x10", "0x0_0x1ffffffff"])
def test_malformed_bundle_names_are_refused(text: str) -> None:
    with pytest.raises(InvalidBundle):
        parse_bundle(text)


@pytest.mark.parametrize("count", [0, -1, BUNDLES_MAX + 1, True, 2.5])
def test_bundle_count_out_of_range_is_refused(count: object) -> None:
    with pytest.raises(InvalidBundle):
        equal_boundaries(count)  # type: ignore[arg-type]


def test_parse_round_trips() -> None:
    assert parse_bundle("0x40000000_0x80000000") == BundleRange(0x40000000, 0x80000000)
    assert str(parse_bundle("0x00000000_0xffffffff")) == "0x00000000_0xffffffff"
