"""broker.topics.dispatch.key_selector.murmur3_x86_32 (mmh3) against MurmurHash3_x86_32 reference vectors.

The expected values were produced by the `mmh3` C extension (an independent implementation of
Appleby's reference code); "" seeds 0/1/0xFFFFFFFF and the "quick brown fox" line are also the
published SMHasher vectors. The slot column is `(h & 0x7FFFFFFF) % 65536`.
"""

from __future__ import annotations

import pytest

from broker.topics.dispatch.key_selector import KEY_SLOTS, key_slot, murmur3_x86_32

VECTORS = [
    (b"", 0x0, 0x00000000, 0),
    (b"", 0x1, 0x514E28B7, 10423),
    (b"", 0xFFFFFFFF, 0x81F16F39, 28473),
    (b"a", 0x0, 0x3C2569B2, 27058),
    (b"ab", 0x0, 0x9BBFD75F, 55135),
    (b"abc", 0x0, 0xB3DD93FA, 37882),
    (b"abcd", 0x0, 0x43ED676A, 26474),
    (b"hello", 0x0, 0x248BFA47, 64071),
    (b"hello", 0x2A, 0xE2DBD2E1, 53985),
    (b"Hello, world!", 0x4D2, 0xFAF6CDB3, 52659),
    (b"The quick brown fox jumps over the lazy dog", 0x0, 0x2E4FF723, 63267),
    (b"NONE_KEY", 0x0, 0x9E15BEA3, 48803),
    (b"key-1", 0x0, 0x98B115A0, 5536),
    (b"\x00\x00\x00\x00", 0x0, 0x2362F9DE, 63966),
    (bytes(range(256)), 0x0, 0xE40A0E56, 3670),
    ("日本語".encode(), 0x0, 0xA5A47297, 29335),
]


@pytest.mark.parametrize("data, seed, expected, slot", VECTORS)
def test_reference_vectors(data: bytes, seed: int, expected: int, slot: int) -> None:
    assert murmur3_x86_32(data, seed) == expected
    if seed == 0:
        assert key_slot(data) == slot


def test_slots_stay_in_range_and_accept_memoryview() -> None:
    for i in range(2000):
        key = f"key-{i}".encode()
        assert 0 <= key_slot(key) < KEY_SLOTS
        assert murmur3_x86_32(memoryview(key)) == murmur3_x86_32(key)
