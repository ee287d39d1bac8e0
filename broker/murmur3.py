"""MurmurHash3 x86 32-bit and the Key_Shared hash slot (PROTOCOL.md §8.10).

Pulsar's broker assigns a Key_Shared message to the consumer owning slot
`(murmur3_x86_32(sticky_key, seed=0) & 0x7FFFFFFF) % 65536`; Sticky consumers bring ranges over
those slots, so the function must match Pulsar's bit for bit. Keys are short (message keys), so
a pure-Python implementation is fast enough (about a microsecond for a 16-byte key).

What must hold: `murmur3_x86_32` equals the reference MurmurHash3_x86_32 (Austin Appleby's
smhasher) for every input and seed, as an unsigned 32-bit value; `key_slot` is within 0..65535.
"""

from __future__ import annotations

import struct

KEY_SLOTS = 65536  # Key_Shared hash space: slots 0..65535, ranges inclusive

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF


def murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of `data` as an unsigned 32-bit int."""
    h = seed & _M32
    length = len(data)
    nblocks = length // 4
    for (k,) in struct.iter_unpack("<I", memoryview(data)[: nblocks * 4]):
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = data[nblocks * 4:]
    k = 0
    rest = length & 3
    if rest == 3:
        k ^= tail[2] << 16
    if rest >= 2:
        k ^= tail[1] << 8
    if rest >= 1:
        k ^= tail[0]
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def key_slot(key: bytes) -> int:
    """The Key_Shared hash slot (0..65535) of a sticky key, as Pulsar's broker computes it."""
    return (murmur3_x86_32(key) & 0x7FFFFFFF) % KEY_SLOTS
